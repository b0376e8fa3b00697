"""Dynamic handlers: a workflow takes signals and queries by names it did not declare.

A dynamic signal handler records every signal; a query handler is set at run time; the run
waits for its async handlers to finish (``all_handlers_finished``) before it completes.
Run it against ``make run``: ``python -m examples.dynamic_handlers``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import timedelta

from sdk import workflow
from sdk.client import Client
from sdk.common import RawValue
from sdk.envconfig import ClientConfig
from sdk.worker import Worker


@workflow.defn
class Inbox:
    def __init__(self) -> None:
        self.received: list[str] = []
        self.closed = False

    @workflow.run
    async def run(self) -> list[str]:
        workflow.set_query_handler("count", lambda: len(self.received))
        await workflow.wait_condition(lambda: self.closed)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.received

    @workflow.signal(dynamic=True)
    async def any_signal(self, name: str, args: Sequence[RawValue]) -> None:
        values = [workflow.payload_converter().from_payload(a.payload) for a in args]
        if name == "close":
            await workflow.sleep(timedelta(milliseconds=100))  # a handler still at work
            self.closed = True
        else:
            self.received.append(f"{name}: {', '.join(map(str, values))}")


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"inbox-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[Inbox]):
        handle = await client.start_workflow(
            Inbox.run, id=f"inbox-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        await handle.signal("greeting", "hello")
        await handle.signal("order", args=["o-7", 3])
        print(f"Count so far: {await handle.query('count')}")
        await handle.signal("close")
        print(f"Workflow result: {await handle.result()}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
