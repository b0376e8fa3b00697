"""Child workflows: a parent ships an order's parcels, one child workflow each, in parallel,
and sums what they report.

Each child is a workflow of its own (its own id, history and retries), and the parent's
history records only that it started and how it ended. ``execute_child_workflow`` waits for
the result; ``start_child_workflow`` answers a handle first (to signal it, or await it later).
Written as a Temporal program is, with only the imports changed. Run it against
``make run``: ``python -m examples.child_workflows``.
"""

from __future__ import annotations

import asyncio
import uuid

from sdk import workflow
from sdk.client import Client
from sdk.envconfig import ClientConfig
from sdk.worker import Worker


@workflow.defn
class ShipParcel:
    @workflow.run
    async def run(self, parcel: str, weight_kg: int) -> int:
        workflow.logger.info("shipping %s", parcel)
        return weight_kg


@workflow.defn
class ShipOrder:
    @workflow.run
    async def run(self, order_id: str, weights: list[int]) -> str:
        parent = workflow.info().workflow_id
        children = [
            workflow.execute_child_workflow(
                ShipParcel.run, args=[f"{order_id}/{n}", weight], id=f"{parent}-parcel-{n}"
            )
            for n, weight in enumerate(weights, start=1)
        ]
        shipped = await asyncio.gather(*children)
        # One more, started first and awaited later through its handle.
        extra = await workflow.start_child_workflow(
            ShipParcel.run, args=[f"{order_id}/gift", 1], id=f"{parent}-parcel-gift"
        )
        total = sum(shipped) + await extra
        return f"{len(shipped) + 1} parcels, {total} kg"


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"shipping-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[ShipOrder, ShipParcel]):
        workflow_id = f"order-{uuid.uuid4().hex[:8]}"
        result = await client.execute_workflow(
            ShipOrder.run, args=["o-7", [3, 5, 2]], id=workflow_id, task_queue=task_queue
        )
        print(f"Workflow result: {result}")
        parcel = await client.get_workflow_handle(f"{workflow_id}-parcel-2").result()
        print(f"Parcel 2 on its own: {parcel} kg")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
