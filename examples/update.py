"""Workflow Update: change a running workflow and get an answer back, in one call.

A cart takes ``add_item`` updates: the validator refuses an empty name before anything is
written (the history shows no trace of it), the handler adds the item and returns the cart's
size. ``execute_update`` waits for that value; ``start_update`` returns once the update is
accepted, and its handle's ``result()`` waits for the rest. The same update id sent twice is
applied once. Run it against ``make run``: ``python -m examples.update``.
"""

from __future__ import annotations

import asyncio
import uuid

from sdk import workflow
from sdk.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from sdk.envconfig import ClientConfig
from sdk.exceptions import ApplicationError
from sdk.worker import Worker


@workflow.defn
class Cart:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.checked_out = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.checked_out and workflow.all_handlers_finished())
        return self.items

    @workflow.update
    async def add_item(self, name: str) -> int:
        await workflow.sleep(0.1)  # a handler may wait on timers and activities
        self.items.append(name)
        return len(self.items)

    @add_item.validator
    def validate_add_item(self, name: str) -> None:
        if not name:
            raise ApplicationError("an item needs a name")

    @workflow.signal
    def checkout(self) -> None:
        self.checked_out = True


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"cart-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[Cart]):
        handle = await client.start_workflow(
            Cart.run, id=f"cart-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        print(f"Items after apple: {await handle.execute_update(Cart.add_item, 'apple')}")
        try:
            await handle.execute_update(Cart.add_item, "")
        except WorkflowUpdateFailedError as err:
            print(f"Rejected: {err.cause}")
        pending = await handle.start_update(
            Cart.add_item, "pear", wait_for_stage=WorkflowUpdateStage.ACCEPTED, id="add-pear"
        )
        print(f"Items after pear: {await pending.result()}")
        again = await handle.execute_update(Cart.add_item, "pear", id="add-pear")
        print(f"Same update id again: {again}")
        await handle.signal(Cart.checkout)
        print(f"Workflow result: {await handle.result()}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
