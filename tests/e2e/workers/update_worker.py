"""A worker process for the Update tests: a cart whose ``add`` update waits for a ``release``
signal before it completes, so a test can kill the process between accept and complete."""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import timedelta

from sdk import workflow
from sdk.client import Client
from sdk.exceptions import ApplicationError
from sdk.worker import Worker


@workflow.defn
class HeldCart:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.released = False
        self.closed = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.closed and workflow.all_handlers_finished())
        return self.items

    @workflow.update
    async def add(self, item: str) -> int:
        await workflow.wait_condition(lambda: self.released)
        self.items.append(item)
        return len(self.items)

    @add.validator
    def check_add(self, item: str) -> None:
        if not item:
            raise ApplicationError("an item needs a name")

    @workflow.signal
    def release(self) -> None:
        self.released = True

    @workflow.signal
    def close(self) -> None:
        self.closed = True


async def main() -> None:
    client = await Client.connect(
        os.environ["CHRONICLE_URL"],
        namespace=os.environ["CHRONICLE_NAMESPACE"],
        api_key=os.environ["CHRONICLE_API_KEY"],
    )
    worker = Worker(
        client,
        task_queue=os.environ["TASK_QUEUE"],
        workflows=[HeldCart],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(worker.shutdown()))
    await worker.run()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
