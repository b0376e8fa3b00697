"""Order fulfilment: charge the card, wait 30 days for a cancel, then ship, or refund on cancel.

Run ``python -m examples.order_fulfilment`` against ``make run`` (its demo worker hosts this),
then ``cancel`` it within the window with ``python -m examples.order_fulfilment cancel <id>``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import timedelta

from examples._connect import TASK_QUEUE, connect
from sdk import activity, workflow

STEP = timedelta(seconds=10)


@activity.defn
async def charge_card(order_id: str) -> str:
    return f"charge-{order_id}"


@activity.defn
async def refund(charge_id: str) -> str:
    return f"refunded {charge_id}"


@activity.defn
async def ship(order_id: str) -> str:
    return f"shipped {order_id}"


@workflow.defn
class OrderFulfilment:
    def __init__(self) -> None:
        self.cancel_requested = False

    @workflow.run
    async def run(self, order_id: str) -> str:
        charge = await workflow.execute_activity(charge_card, order_id, start_to_close_timeout=STEP)
        try:
            await workflow.wait_condition(lambda: self.cancel_requested, timeout=timedelta(days=30))
        except TimeoutError:
            shipped: str = await workflow.execute_activity(ship, order_id, start_to_close_timeout=STEP)
            return shipped
        refunded: str = await workflow.execute_activity(refund, charge, start_to_close_timeout=STEP)
        return refunded

    @workflow.signal
    def cancel_order(self) -> None:
        self.cancel_requested = True


async def main(argv: list[str]) -> None:
    client = await connect()
    if argv[:1] == ["cancel"]:
        await client.get_workflow_handle(argv[1]).signal(OrderFulfilment.cancel_order)
        print(await client.get_workflow_handle(argv[1]).result())
    else:
        order_id = f"order-{uuid.uuid4().hex[:6]}"
        handle = await client.start_workflow(
            OrderFulfilment.run, order_id, id=order_id, task_queue=TASK_QUEUE
        )
        print(f"started {handle.id}; it ships in 30 days unless cancelled")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
