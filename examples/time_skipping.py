"""Testing a month-long workflow in a second: ``WorkflowEnvironment.start_time_skipping()``.

A free trial lasts 30 days unless the customer cancels. Under a time-skipping environment
the server's clock jumps to the next timer whenever the worker has nothing to do, so the
30-day wait ends at once, and ``workflow.now()`` inside the workflow says 30 days passed.
``env.auto_time_skipping_disabled()`` holds the clock while the test acts on a running
workflow, and ``env.sleep()`` moves it by hand. Written as a Temporal test is, with only the
imports changed.

It starts its own Chronicle stack from this checkout (``manage.py start_dev`` with
``CHRONICLE_TIME_SKIPPING=true``): run it from the checkout, ``python -m
examples.time_skipping``, with ``DATABASE_URL`` naming an empty database of its own, or
unset for an embedded PostgreSQL in a temporary directory. Never point it at a database
another stack uses: the test stack fires that database's timers on its skipped clock.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

from sdk import activity, workflow
from sdk.api.enums.v1 import EventType
from sdk.testing import WorkflowEnvironment
from sdk.worker import Worker

TRIAL = timedelta(days=30)


@activity.defn
async def charge(customer: str) -> str:
    return f"charged {customer}"


@workflow.defn
class FreeTrial:
    def __init__(self) -> None:
        self.cancelled = False

    @workflow.run
    async def run(self, customer: str) -> str:
        started = workflow.now()
        try:
            await workflow.wait_condition(lambda: self.cancelled, timeout=TRIAL)
        except TimeoutError:
            await workflow.execute_activity(charge, customer, start_to_close_timeout=timedelta(seconds=10))
            outcome = "charged"
        else:
            outcome = "cancelled"
        days = (workflow.now() - started) / timedelta(days=1)
        return f"Trial of {customer}: {outcome} after {days:.0f} days"

    @workflow.signal
    def cancel(self) -> None:
        self.cancelled = True


async def main() -> None:
    async with await WorkflowEnvironment.start_time_skipping() as env:
        print(f"Supports time skipping: {env.supports_time_skipping}")
        task_queue = f"trials-{uuid.uuid4().hex[:8]}"
        async with Worker(env.client, task_queue=task_queue, workflows=[FreeTrial], activities=[charge]):
            # Nobody cancels: the server skips the whole month.
            began = time.monotonic()
            result = await env.client.execute_workflow(
                FreeTrial.run, "ada", id=f"trial-{uuid.uuid4().hex[:8]}", task_queue=task_queue
            )
            print(result)
            print(f"Thirty days took {time.monotonic() - began:.2f} s of wall time")

            # Cancelled on day 10: hold the clock, move it by hand, then signal.
            with env.auto_time_skipping_disabled():
                handle = await env.client.start_workflow(
                    FreeTrial.run, "bob", id=f"trial-{uuid.uuid4().hex[:8]}", task_queue=task_queue
                )
                async for event in handle.fetch_history_events(wait_new_event=True):
                    if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
                        break  # the first workflow task ran: the 30-day wait has begun
                await env.sleep(timedelta(days=10))
                await handle.signal(FreeTrial.cancel)
                print(await handle.result())

        ahead = await env.get_current_time() - datetime.now(UTC)
        print(f"Server clock ahead of real time: {ahead / timedelta(days=1):.0f} days")


if __name__ == "__main__":
    asyncio.run(main())
