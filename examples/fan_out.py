"""Fan-out: one activity per item, all in flight at once, results gathered in order.

Run ``python -m examples.fan_out`` against ``make run``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from examples._connect import TASK_QUEUE, connect
from sdk import activity, workflow


@activity.defn
def square(value: int) -> int:
    return value * value


@workflow.defn
class FanOut:
    @workflow.run
    async def run(self, count: int) -> int:
        tasks = [
            workflow.start_activity(square, n, start_to_close_timeout=timedelta(seconds=10))
            for n in range(count)
        ]
        return sum([await task for task in tasks])


async def main() -> None:
    client = await connect()
    total = await client.execute_workflow(
        FanOut.run, 10, id=f"fan-out-{uuid.uuid4().hex[:6]}", task_queue=TASK_QUEUE
    )
    print("sum of squares below 10:", total)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
