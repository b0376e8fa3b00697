"""Reset after a bad deploy, with real SDK workers.

A run started on v1 of the code meets v2, which issues other commands for the same
history: every workflow task fails with a nondeterminism error and the run is stuck.
Resetting it to its first workflow task gives v2 a history it can own: the new run
replays nothing of v1's choices, receives the signal again, and completes on v2.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from sdk import activity, workflow
from sdk.client import Client, WorkflowHandle
from sdk.worker import Worker
from tests.conftest import Stack, Tenant

STEP = timedelta(seconds=10)
NONDETERMINISM_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"
RESET_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW"


@activity.defn
async def pack(item: str) -> str:
    return f"packed {item}"


@activity.defn
async def weigh(item: str) -> str:
    return f"weighed {item}"


@activity.defn
async def label(carrier: str) -> str:
    return f"labelled for {carrier}"


@workflow.defn(name="Parcel")
class ParcelV1:
    def __init__(self) -> None:
        self.carrier = ""

    @workflow.run
    async def run(self, item: str) -> str:
        packed = await workflow.execute_activity(pack, item, start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: bool(self.carrier))
        labelled = await workflow.execute_activity(label, self.carrier, start_to_close_timeout=STEP)
        return f"v1: {packed}; {labelled}"

    @workflow.signal
    def dispatch(self, carrier: str) -> None:
        self.carrier = carrier


@workflow.defn(name="Parcel")
class ParcelV2:
    """The new deploy weighs before packing: not replayable over v1's history."""

    def __init__(self) -> None:
        self.carrier = ""

    @workflow.run
    async def run(self, item: str) -> str:
        weighed = await workflow.execute_activity(weigh, item, start_to_close_timeout=STEP)
        packed = await workflow.execute_activity(pack, item, start_to_close_timeout=STEP)
        await workflow.wait_condition(lambda: bool(self.carrier))
        labelled = await workflow.execute_activity(label, self.carrier, start_to_close_timeout=STEP)
        return f"v2: {weighed}; {packed}; {labelled}"

    @workflow.signal
    def dispatch(self, carrier: str) -> None:
        self.carrier = carrier


async def _until(check: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.1)


async def _events(handle: WorkflowHandle) -> list[dict[str, Any]]:
    return [e async for e in handle.fetch_history_events()]


async def _nondeterminism_failures(handle: WorkflowHandle) -> int:
    return sum(1 for e in await _events(handle) if NONDETERMINISM_CAUSE in str(e.get("attributes")))


def test_reset_to_the_first_workflow_task_unwedges_a_run_after_a_nondeterministic_deploy(
    stack: Stack, tenant: Tenant
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    wid = f"parcel-{uuid.uuid4().hex[:8]}"
    options = {
        "task_queue": queue,
        "activities": [pack, weigh, label],
        "sticky_queue_schedule_to_start_timeout": timedelta(seconds=1),
    }

    async def scenario() -> tuple[str, str, str, list[dict[str, Any]]]:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        async with Worker(client, workflows=[ParcelV1], **options):
            stuck = await client.start_workflow(ParcelV1.run, "lamp", id=wid, task_queue=queue)
            await _until(lambda: _has(stuck, "ActivityTaskCompleted"))
        async with Worker(client, workflows=[ParcelV2], **options):
            await stuck.signal(ParcelV1.dispatch, "post")
            await _until(lambda: _at_least_one(stuck))
            assert (await stuck.describe()).status.name == "RUNNING"
            new_run_id = await stuck.reset(reset_type="FirstWorkflowTask", reason="v2 cannot replay v1")
            current = client.get_workflow_handle(wid)
            result = await asyncio.wait_for(current.result(), 60)
        base = await stuck.describe()
        new_events = await _events(client.get_workflow_handle(wid, run_id=new_run_id))
        await client.close()
        assert base.status.name == "TERMINATED" and base.raw["reset_run_id"] == new_run_id
        return str(stuck.run_id), new_run_id, str(result), new_events

    base_run_id, new_run_id, result, events = asyncio.run(scenario())
    assert result == "v2: weighed lamp; packed lamp; labelled for post"
    types = [e["event_type"] for e in events]
    assert types[:6] == [
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskFailed",
        "WorkflowExecutionSignaled",
        "WorkflowTaskScheduled",
    ]
    reset_failure = events[3]["attributes"]
    assert reset_failure["cause"] == RESET_CAUSE and reset_failure["base_run_id"] == base_run_id
    assert reset_failure["new_run_id"] == new_run_id
    assert types[-1] == "WorkflowExecutionCompleted" and NONDETERMINISM_CAUSE not in str(events)


async def _has(handle: WorkflowHandle, event_type: str) -> bool:
    return any(e["event_type"] == event_type for e in await _events(handle))


async def _at_least_one(handle: WorkflowHandle) -> bool:
    return await _nondeterminism_failures(handle) > 0
