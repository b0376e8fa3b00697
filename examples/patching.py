"""Patching: change a workflow's code while runs of the old code are still open.

Version 1 charges an invoice, then waits for ``ship``. Version 2 adds a fraud check before
the charge, behind ``workflow.patched("fraud-check")``: a new run takes the new branch (and
records a marker that says so); a run that charged under version 1 replays on version 2
without the marker, so ``patched`` is false for it and its history still matches. Once no
run of version 1 is open, ``deprecate_patch`` and then removing the old branch finish the
change. Written as a Temporal program is, with only the imports changed. Run it against
``make run``: ``python -m examples.patching``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from sdk import activity, workflow
from sdk.client import Client, WorkflowHandle
from sdk.envconfig import ClientConfig
from sdk.worker import Worker

STEP = timedelta(seconds=10)


@activity.defn
async def charge(invoice: str) -> str:
    return "charged"


@activity.defn
async def fraud_check(invoice: str) -> str:
    return "checked"


@workflow.defn(name="Invoice")
class InvoiceV1:
    def __init__(self) -> None:
        self.steps: list[str] = []
        self.shipped = False

    @workflow.run
    async def run(self, invoice: str) -> str:
        self.steps.append(await workflow.execute_activity(charge, invoice, start_to_close_timeout=STEP))
        await workflow.wait_condition(lambda: self.shipped)
        return ", ".join([*self.steps, "shipped"])

    @workflow.signal
    def ship(self) -> None:
        self.shipped = True

    @workflow.query
    def steps_done(self) -> list[str]:
        return self.steps


@workflow.defn(name="Invoice")
class InvoiceV2(InvoiceV1):
    @workflow.run
    async def run(self, invoice: str) -> str:
        if workflow.patched("fraud-check"):
            self.steps.append(
                await workflow.execute_activity(fraud_check, invoice, start_to_close_timeout=STEP)
            )
        self.steps.append(await workflow.execute_activity(charge, invoice, start_to_close_timeout=STEP))
        await workflow.wait_condition(lambda: self.shipped)
        return ", ".join([*self.steps, "shipped"])


async def charged(handle: WorkflowHandle) -> None:
    """Until the run has charged (its worker answers the query)."""
    for _ in range(150):
        if "charged" in await handle.query(InvoiceV1.steps_done):
            return
        await asyncio.sleep(0.2)
    raise TimeoutError("the invoice was not charged")


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"invoices-{uuid.uuid4().hex[:8]}"
    activities = [charge, fraud_check]
    # Version 1 is deployed; a run starts and charges. A short sticky timeout lets the next
    # worker take the run soon after this one stops.
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[InvoiceV1],
        activities=activities,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    ):
        old = await client.start_workflow(
            "Invoice", "inv-1", id=f"invoice-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        await charged(old)
    # Version 2 replaces it: the old run goes on where it was; a new run takes the new branch.
    async with Worker(client, task_queue=task_queue, workflows=[InvoiceV2], activities=activities):
        new = await client.start_workflow(
            "Invoice", "inv-2", id=f"invoice-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        await charged(new)
        for handle in (old, new):
            await handle.signal(InvoiceV1.ship)
        print(f"Run started on version 1: {await old.result()}")
        print(f"Run started on version 2: {await new.result()}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
