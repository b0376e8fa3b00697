"""Workflow code that is cancelled or crashes: cleanup runs, and a bug only stalls the run.

A plain exception in workflow code is a bug, not a business failure: the task fails and
the run stays open until fixed code is deployed, which then finishes it.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from sdk import activity, workflow
from sdk.client import Client, WorkflowHandle
from sdk.worker import Worker
from tests.conftest import Api, Stack, Tenant, wait_until

UNHANDLED_FAILURE_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE"


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:8]}"


async def _client(stack: Stack, tenant: Tenant) -> Client:
    return await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])


@activity.defn
async def release_hold(order: str) -> str:
    return f"released {order}"


@workflow.defn
class Hold:
    """Holds an order for an hour; on cancellation it releases the hold before closing."""

    @workflow.run
    async def run(self, order: str) -> str:
        try:
            await workflow.sleep(timedelta(hours=1))
        except asyncio.CancelledError:
            released: str = await workflow.execute_activity(
                release_hold, order, start_to_close_timeout=timedelta(seconds=10)
            )
            return released
        return "held for an hour"


def test_a_cancelled_timer_lets_the_workflow_run_its_cleanup(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    async def scenario() -> tuple[object, str]:
        client = await _client(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Hold], activities=[release_hold]):
            handle = await client.start_workflow(Hold.run, "o-7", id=_wid(), task_queue=queue)
            await asyncio.to_thread(wait_until, lambda: "TimerStarted" in api.event_types(handle.id))
            await handle.cancel()
            result = await asyncio.wait_for(handle.result(), 60)
        await client.close()
        return result, handle.id

    result, wid = asyncio.run(scenario())
    assert result == "released o-7"
    events = api.event_types(wid)
    assert events.index("WorkflowExecutionCancelRequested") < events.index("TimerCanceled")
    assert events[-1] == "WorkflowExecutionCompleted"


@workflow.defn(name="Invoice")
class InvoiceWithBug:
    @workflow.run
    async def run(self, amount: int) -> str:
        await workflow.sleep(0.1)
        raise ZeroDivisionError("tax rate is zero")


@workflow.defn(name="Invoice")
class InvoiceFixed:
    @workflow.run
    async def run(self, amount: int) -> str:
        await workflow.sleep(0.1)
        return f"invoiced {amount}"


def _task_failures(api: Api, workflow_id: str) -> list[str]:
    return [
        e["attributes"]["cause"] for e in api.events(workflow_id) if e["event_type"] == "WorkflowTaskFailed"
    ]


def test_a_bug_in_workflow_code_stalls_the_run_until_fixed_code_finishes_it(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    async def scenario() -> str:
        client = await _client(stack, tenant)
        async with Worker(
            client,
            task_queue=queue,
            workflows=[InvoiceWithBug],
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        ):
            handle: WorkflowHandle = await client.start_workflow("Invoice", 12, id=_wid(), task_queue=queue)
            await asyncio.to_thread(wait_until, lambda: _task_failures(api, handle.id), 30)
            assert (await handle.describe()).status.name == "RUNNING"
        async with Worker(client, task_queue=queue, workflows=[InvoiceFixed]):
            result: str = await asyncio.wait_for(handle.result(), 60)
        await client.close()
        assert set(_task_failures(api, handle.id)) == {UNHANDLED_FAILURE_CAUSE}
        return result

    assert asyncio.run(scenario()) == "invoiced 12"
