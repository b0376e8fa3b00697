"""The Chronicle side of the SDK benchmark: the workflows, and a worker process hosting them.

Run as ``python bench/sdk_bench_worker.py`` with CHRONICLE_URL, CHRONICLE_NAMESPACE,
CHRONICLE_API_KEY and TASK_QUEUE set; SIGTERM shuts the worker down gracefully. With
BENCH_PROFILE=path the worker runs under cProfile and writes its stats there on exit.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import signal
from datetime import timedelta

from sdk import activity, workflow
from sdk.client import Client
from sdk.worker import Worker

STEP_TIMEOUT = timedelta(seconds=30)


@activity.defn(name="bench_step")
async def bench_step(i: int) -> int:
    """The work of one step: none, so the figures are the system's own cost."""
    return i


@workflow.defn(name="OneStep")
class OneStep:
    @workflow.run
    async def run(self) -> int:
        result: int = await workflow.execute_activity(bench_step, 1, start_to_close_timeout=STEP_TIMEOUT)
        return result


@workflow.defn(name="TenSteps")
class TenSteps:
    @workflow.run
    async def run(self) -> int:
        total = 0
        for i in range(10):
            total += await workflow.execute_activity(bench_step, i, start_to_close_timeout=STEP_TIMEOUT)
        return total


@workflow.defn(name="SleepUntil")
class SleepUntil:
    @workflow.run
    async def run(self, due: float) -> float:
        """Sleep until ``due`` (epoch seconds); return how late the wake-up task started."""
        await workflow.sleep(max(0.001, due - workflow.now().timestamp()))
        return workflow.now().timestamp() - due


WORKFLOWS = [OneStep, TenSteps, SleepUntil]


async def serve() -> None:
    client = await Client.connect(
        os.environ["CHRONICLE_URL"],
        namespace=os.environ["CHRONICLE_NAMESPACE"],
        api_key=os.environ["CHRONICLE_API_KEY"],
    )
    worker = Worker(
        client,
        task_queue=os.environ["TASK_QUEUE"],
        workflows=WORKFLOWS,
        activities=[bench_step],
        max_concurrent_workflow_task_polls=int(os.environ.get("BENCH_WORKFLOW_POLLS", "5")),
        nonsticky_to_sticky_poll_ratio=float(os.environ.get("BENCH_NONSTICKY_RATIO", "0.2")),
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(worker.shutdown()))
    await worker.run()
    await client.close()


def main() -> None:
    path = os.environ.get("BENCH_PROFILE")
    if not path:
        asyncio.run(serve())
        return
    profiler = cProfile.Profile()
    profiler.runcall(asyncio.run, serve())
    profiler.dump_stats(path)


if __name__ == "__main__":
    main()
