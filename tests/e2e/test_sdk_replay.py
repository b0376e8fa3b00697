"""Replay and redeploy: recorded histories checked against changed workflow code.

A history fetched from a finished run must replay clean on the code that wrote it
and be refused on code that would issue different commands; a worker running such
code fails the workflow task (recorded in history) until fixed code takes over.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from sdk import activity, workflow
from sdk._runtime.replayer import WorkflowHistory
from sdk.client import Client, WorkflowHandle
from sdk.exceptions import NondeterminismError
from sdk.worker import Replayer, Worker
from tests.conftest import Api, Stack, Tenant, wait_until

STEP = timedelta(seconds=10)
NONDETERMINISM_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:8]}"


async def _client(stack: Stack, tenant: Tenant) -> Client:
    return await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])


@activity.defn
async def reserve(item: str) -> str:
    return f"reserved {item}"


@activity.defn
async def bill(item: str) -> str:
    return f"billed {item}"


@workflow.defn(name="Checkout")
class Checkout:
    """The recorded code: reserve, a short durable timer, then bill."""

    @workflow.run
    async def run(self, item: str) -> str:
        reserved = await workflow.execute_activity(reserve, item, start_to_close_timeout=STEP)
        await workflow.sleep(0.2)
        billed = await workflow.execute_activity(bill, item, start_to_close_timeout=STEP)
        return f"{reserved}, {billed}"


@workflow.defn(name="Checkout")
class CheckoutWithOtherActivity:
    """Calls a different first activity than the recorded run did."""

    @workflow.run
    async def run(self, item: str) -> str:
        billed = await workflow.execute_activity(bill, item, start_to_close_timeout=STEP)
        await workflow.sleep(0.2)
        reserved = await workflow.execute_activity(bill, item, start_to_close_timeout=STEP)
        return f"{billed}, {reserved}"


@workflow.defn(name="Checkout")
class CheckoutReordered:
    """Sleeps before reserving: the same commands in another order."""

    @workflow.run
    async def run(self, item: str) -> str:
        await workflow.sleep(0.2)
        reserved = await workflow.execute_activity(reserve, item, start_to_close_timeout=STEP)
        billed = await workflow.execute_activity(bill, item, start_to_close_timeout=STEP)
        return f"{reserved}, {billed}"


@workflow.defn(name="Checkout")
class CheckoutWithoutTimer:
    """Drops the durable timer the recorded run started."""

    @workflow.run
    async def run(self, item: str) -> str:
        reserved = await workflow.execute_activity(reserve, item, start_to_close_timeout=STEP)
        billed = await workflow.execute_activity(bill, item, start_to_close_timeout=STEP)
        return f"{reserved}, {billed}"


def _finished_checkout_history(stack: Stack, tenant: Tenant, queue: str) -> WorkflowHistory:
    async def scenario() -> WorkflowHistory:
        client = await _client(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Checkout], activities=[reserve, bill]):
            handle = await client.start_workflow(Checkout.run, "book", id=_wid(), task_queue=queue)
            assert await handle.result() == "reserved book, billed book"
        history = await handle.fetch_history()
        await client.close()
        return history

    return asyncio.run(scenario())


def test_a_finished_history_replays_clean_on_its_own_code(stack: Stack, tenant: Tenant, queue: str) -> None:
    history = _finished_checkout_history(stack, tenant, queue)
    restored = WorkflowHistory.from_json(history.to_json())
    assert Replayer(workflows=[Checkout]).replay_workflow(restored).replay_failure is None


@pytest.mark.parametrize(
    "changed",
    [CheckoutWithOtherActivity, CheckoutReordered, CheckoutWithoutTimer],
    ids=["different-activity", "reordered-steps", "removed-timer"],
)
def test_a_changed_workflow_class_is_refused_on_replay(
    stack: Stack, tenant: Tenant, queue: str, changed: type
) -> None:
    history = _finished_checkout_history(stack, tenant, queue)
    with pytest.raises(NondeterminismError):
        Replayer(workflows=[changed]).replay_workflow(history)
    reported = asyncio.run(
        Replayer(workflows=[changed]).replay_workflows([history], raise_on_replay_failure=False)
    )
    assert isinstance(reported.replay_failures[history.run_id], NondeterminismError)


@workflow.defn(name="Shipment")
class Shipment:
    """Packs, then waits for a dispatch signal before labelling."""

    def __init__(self) -> None:
        self.carrier = ""

    @workflow.run
    async def run(self, item: str) -> str:
        packed = await workflow.execute_activity(reserve, item, start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: bool(self.carrier))
        labelled = await workflow.execute_activity(bill, self.carrier, start_to_close_timeout=STEP)
        return f"{packed}; {labelled}"

    @workflow.signal
    def dispatch(self, carrier: str) -> None:
        self.carrier = carrier


@workflow.defn(name="Shipment")
class ShipmentBroken:
    """A bad deploy: the first step now calls a different activity."""

    def __init__(self) -> None:
        self.carrier = ""

    @workflow.run
    async def run(self, item: str) -> str:
        packed: str = await workflow.execute_activity(bill, item, start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: bool(self.carrier))
        return packed

    @workflow.signal
    def dispatch(self, carrier: str) -> None:
        self.carrier = carrier


async def _until(check: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    """Poll an async check until it holds; fail clearly at the deadline."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.1)


async def _event_types(handle: WorkflowHandle) -> list[str]:
    return [e["event_type"] async for e in handle.fetch_history_events()]


def test_a_nondeterministic_deploy_fails_the_task_until_fixed_code_finishes_it(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    short_sticky = timedelta(seconds=1)
    wid = _wid()

    async def scenario() -> Any:
        client = await _client(stack, tenant)
        activities = [reserve, bill]
        async with Worker(
            client,
            task_queue=queue,
            workflows=[Shipment],
            activities=activities,
            sticky_queue_schedule_to_start_timeout=short_sticky,
        ):
            handle = await client.start_workflow(Shipment.run, "lamp", id=wid, task_queue=queue)
            await _until(lambda: _has_completed_activity(handle))
        async with Worker(
            client,
            task_queue=queue,
            workflows=[ShipmentBroken],
            activities=activities,
            sticky_queue_schedule_to_start_timeout=short_sticky,
        ):
            await handle.signal(Shipment.dispatch, "post")
            await _until(lambda: _has_failed_task(handle))
        async with Worker(client, task_queue=queue, workflows=[Shipment], activities=activities):
            result = await asyncio.wait_for(handle.result(), 60)
        await client.close()
        return result

    assert asyncio.run(scenario()) == "reserved lamp; billed post"
    failed = [e for e in api.events(wid) if e["event_type"] == "WorkflowTaskFailed"]
    assert failed and failed[0]["attributes"]["cause"] == NONDETERMINISM_CAUSE
    assert wait_until(lambda: api.event_types(wid)[-1] == "WorkflowExecutionCompleted")


async def _has_completed_activity(handle: WorkflowHandle) -> bool:
    return "ActivityTaskCompleted" in await _event_types(handle)


async def _has_failed_task(handle: WorkflowHandle) -> bool:
    return "WorkflowTaskFailed" in await _event_types(handle)
