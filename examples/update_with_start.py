"""Update-with-start: one call starts the workflow if it is not running and sends it an update.

A shopping session per customer: the first ``add_item`` starts the session workflow, later
ones reach the running one (``id_conflict_policy=USE_EXISTING``), and each call returns the
update handler's value. Run it against ``make run``: ``python -m examples.update_with_start``.
"""

from __future__ import annotations

import asyncio
import uuid

from sdk import workflow
from sdk.client import Client, WithStartWorkflowOperation
from sdk.common import WorkflowIDConflictPolicy
from sdk.envconfig import ClientConfig
from sdk.worker import Worker


@workflow.defn
class Session:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.done = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.done and workflow.all_handlers_finished())
        return self.items

    @workflow.update
    def add_item(self, name: str) -> list[str]:
        self.items.append(name)
        return list(self.items)

    @workflow.signal
    def finish(self) -> None:
        self.done = True


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"session-{uuid.uuid4().hex[:8]}"
    session_id = f"session-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[Session]):
        for item in ("apple", "pear"):
            start = WithStartWorkflowOperation(
                Session.run,
                id=session_id,
                task_queue=task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            items = await client.execute_update_with_start_workflow(
                Session.add_item, item, start_workflow_operation=start
            )
            print(f"Cart: {items}")
        handle = await start.workflow_handle()
        await handle.signal(Session.finish)
        print(f"Workflow result: {await handle.result()}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
