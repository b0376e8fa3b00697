"""A worker process for crash tests: hosts ``Journal`` on the queue named in its environment.

Each ``journal`` activity appends its step to the file named by JOURNAL_PATH when it
completes, so a test can count how many times every completed step really ran.
Environment: CHRONICLE_URL, CHRONICLE_NAMESPACE, CHRONICLE_API_KEY, TASK_QUEUE, JOURNAL_PATH
and optionally JOURNAL_HOLD_STEP.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import timedelta

from sdk import activity, workflow
from sdk.client import Client
from sdk.worker import Worker

STEPS_BEFORE_SIGNAL = 2
STEPS_AFTER_SIGNAL = 2


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{line}\n")
        out.flush()
        os.fsync(out.fileno())


@activity.defn
def journal(step: int) -> int:
    """Append the step to the journal file and make it durable before reporting success.

    The first attempt of step JOURNAL_HOLD_STEP (if set) notes that it started and then
    heartbeats forever, so a test can kill the process while that activity is in flight.
    """
    path = os.environ["JOURNAL_PATH"]
    if step == int(os.environ.get("JOURNAL_HOLD_STEP") or 0) and activity.info().attempt == 1:
        _append(path + ".held", str(step))
        while True:
            activity.heartbeat("held")
            time.sleep(0.2)
    _append(path, str(step))
    return step


@workflow.defn
class Journal:
    """Journals two steps, waits for ``resume``, then journals two more and sums them."""

    def __init__(self) -> None:
        self.resumed = False

    @workflow.run
    async def run(self) -> int:
        total = 0
        for step in range(1, STEPS_BEFORE_SIGNAL + STEPS_AFTER_SIGNAL + 1):
            if step == STEPS_BEFORE_SIGNAL + 1:
                await workflow.wait_condition(lambda: self.resumed)
            done: int = await workflow.execute_activity(
                journal,
                step,
                start_to_close_timeout=timedelta(seconds=60),
                heartbeat_timeout=timedelta(seconds=2),
            )
            total += done
        return total

    @workflow.signal
    def resume(self) -> None:
        self.resumed = True


async def main() -> None:
    client = await Client.connect(
        os.environ["CHRONICLE_URL"],
        namespace=os.environ["CHRONICLE_NAMESPACE"],
        api_key=os.environ["CHRONICLE_API_KEY"],
    )
    worker = Worker(
        client,
        task_queue=os.environ["TASK_QUEUE"],
        workflows=[Journal],
        activities=[journal],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(worker.shutdown()))
    await worker.run()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
