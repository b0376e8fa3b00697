"""Cancellation the workflow asks for: a timer, and an activity under each cancellation type.

Run by a real SDK worker against the real stack; what each type waits for shows in the
order of the recorded events and in what the activity itself saw.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest

from sdk import activity, workflow
from sdk.client import Client
from sdk.exceptions import ActivityError
from sdk.worker import Worker
from tests.conftest import Api, Stack, Tenant

cancel_seen = threading.Event()


@activity.defn
async def linger(seconds: float) -> str:
    """Heartbeats for ``seconds``, noting a cancel if one arrives first."""
    try:
        for _ in range(int(seconds * 10)):
            activity.heartbeat("lingering")
            await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        cancel_seen.set()
        raise
    return "finished"


@workflow.defn
class TimerCanceller:
    """Starts a long and a short timer, then cancels the long one once the short fires."""

    @workflow.run
    async def run(self) -> str:
        long_sleep = asyncio.ensure_future(workflow.sleep(timedelta(seconds=60)))
        await workflow.sleep(timedelta(milliseconds=200))
        long_sleep.cancel()
        try:
            await long_sleep
        except asyncio.CancelledError:
            return "long timer cancelled"
        return "long timer fired"


@workflow.defn
class ActivityCanceller:
    """Starts a lingering activity, lets it run a moment, then cancels its task.

    After abandoning it, the workflow stays open long enough to see the activity finish.
    """

    @workflow.run
    async def run(self, cancellation_type: str) -> str:
        task = workflow.start_activity(
            linger,
            2.0,
            start_to_close_timeout=timedelta(seconds=20),
            heartbeat_timeout=timedelta(seconds=2),
            cancellation_type=workflow.ActivityCancellationType[cancellation_type],
        )
        await workflow.sleep(timedelta(seconds=1))
        task.cancel()
        try:
            return f"activity returned {await task}"
        except ActivityError as err:
            return f"activity {type(err.cause).__name__}"
        except asyncio.CancelledError:
            if cancellation_type == "ABANDON":
                await workflow.sleep(timedelta(seconds=2))
            return "task cancelled"


def _run(stack: Stack, tenant: Tenant, queue: str, workflow_run: Any, *args: Any) -> tuple[str, Any]:
    async def scenario() -> tuple[str, Any]:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        wid = f"wf-{uuid.uuid4().hex[:8]}"
        try:
            async with Worker(
                client, task_queue=queue, workflows=[TimerCanceller, ActivityCanceller], activities=[linger]
            ):
                result = await asyncio.wait_for(
                    client.execute_workflow(workflow_run, args=list(args), id=wid, task_queue=queue), 60
                )
                # Let an abandoned or not-yet-confirmed activity finish while the worker runs.
                await asyncio.sleep(0.5)
        finally:
            await client.close()
        return wid, result

    return asyncio.run(scenario())


def test_cancelling_a_timer_records_timer_canceled(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    wid, result = _run(stack, tenant, queue, TimerCanceller.run)
    assert result == "long timer cancelled"
    events = api.event_types(wid)
    assert events.count("TimerStarted") == 2
    assert events.count("TimerFired") == 1
    assert events.count("TimerCanceled") == 1
    assert events.index("TimerFired") < events.index("TimerCanceled")


@pytest.mark.parametrize("cancellation_type", ["TRY_CANCEL", "WAIT_CANCELLATION_COMPLETED", "ABANDON"])
def test_each_activity_cancellation_type(
    stack: Stack, tenant: Tenant, api: Api, queue: str, cancellation_type: str
) -> None:
    cancel_seen.clear()
    wid, result = _run(stack, tenant, queue, ActivityCanceller.run, cancellation_type)
    # Cancelling the task raises asyncio.CancelledError into the workflow under every type;
    # the types differ in what reaches the server and what the workflow waits for.
    assert result == "task cancelled"
    events = api.event_types(wid)
    completed = events.index("WorkflowExecutionCompleted")
    if cancellation_type == "ABANDON":
        # No request reaches the server: the activity runs on, unaware, to its end.
        assert "ActivityTaskCancelRequested" not in events
        assert not cancel_seen.is_set()
        assert events.index("ActivityTaskCompleted") < completed
    elif cancellation_type == "TRY_CANCEL":
        # The request is sent and the workflow moves on in that same workflow task.
        assert events.index("ActivityTaskCancelRequested") < completed
        assert "ActivityTaskCanceled" not in events[:completed]
    else:
        # The workflow waits until the worker confirms the activity saw the cancel.
        assert cancel_seen.is_set()
        assert events.index("ActivityTaskCancelRequested") < events.index("ActivityTaskCanceled") < completed
