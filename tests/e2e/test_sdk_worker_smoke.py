"""Smoke tests of the SDK client and activity worker against the real stack.

Workflow decisions come from the raw-HTTP ScriptedWorker, so these exercise the
client and the activity side of the SDK worker on their own.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest

from sdk import activity, workflow
from sdk._http import NotFoundError
from sdk._runtime.replayer import WorkflowHistory
from sdk.client import Client
from sdk.common import RetryPolicy, WorkflowIDConflictPolicy
from sdk.converter import default_converter
from sdk.exceptions import (
    ApplicationError,
    CancelledError,
    TerminatedError,
    WorkflowAlreadyStartedError,
    WorkflowFailureError,
)
from sdk.worker import Replayer, Worker
from tests.conftest import ROOT, Api, ScriptedWorker, Stack, Tenant, command

payload = default_converter.to_payload


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:8]}"


async def _client(stack: Stack, tenant: Tenant) -> Client:
    return await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])


def _schedule(worker: ScriptedWorker, activity_type: str, *args: Any, **options: Any) -> None:
    task = worker.poll_workflow_task()
    r = worker.complete_workflow_task(
        task,
        command(
            "ScheduleActivityTask",
            activity_id="a1",
            activity_type=activity_type,
            input=[payload(a) for a in args],
            start_to_close_timeout=10,
            **options,
        ),
    )
    assert r.status_code == 200, r.text


def _activity_outcome(worker: ScriptedWorker) -> dict[str, Any]:
    """The ActivityTask* close event the workflow sees next."""
    task = worker.poll_workflow_task(timeout=20)
    closes = [e for e in task["history"]["events"] if e["event_type"].startswith("ActivityTask")]
    return dict(closes[-1])


@activity.defn(name="Greet")
async def greet(name: str) -> str:
    return f"hello {name} (attempt {activity.info().attempt})"


@activity.defn
def refuse(amount: int) -> None:
    raise ApplicationError(f"card declined for {amount}", type="Declined", non_retryable=True)


def test_client_starts_signals_and_reads_the_result(
    stack: Stack, tenant: Tenant, worker: ScriptedWorker
) -> None:
    async def scenario() -> None:
        client = await _client(stack, tenant)
        wid = _wid()
        handle = await client.start_workflow("Order", {"sku": "A1"}, id=wid, task_queue=worker.queue)
        assert handle.run_id
        await handle.signal("approve", "ok")
        description = await handle.describe()
        assert description.status.name == "RUNNING" and description.workflow_type == "Order"

        def decide() -> None:
            task = worker.poll_workflow_task()
            events = task["history"]["events"]
            assert events[0]["attributes"]["input"] == [payload({"sku": "A1"})]
            assert any(e["event_type"] == "WorkflowExecutionSignaled" for e in events)
            worker.complete_workflow_task(
                task, command("CompleteWorkflowExecution", result=[payload({"total": 42})])
            )

        await asyncio.to_thread(decide)
        assert await handle.result() == {"total": 42}
        listed = [row.workflow_id async for row in client.list_workflows(f"WorkflowId = '{wid}'")]
        assert listed == [wid]
        events = [e["event_type"] async for e in handle.fetch_history_events()]
        assert events[0] == "WorkflowExecutionStarted" and events[-1] == "WorkflowExecutionCompleted"
        await client.close()

    asyncio.run(scenario())


def test_terminated_workflow_result_raises_with_the_cause(stack: Stack, tenant: Tenant, queue: str) -> None:
    async def scenario() -> None:
        client = await _client(stack, tenant)
        handle = await client.start_workflow("Order", id=_wid(), task_queue=queue)
        await handle.terminate("operator stopped it")
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        assert isinstance(caught.value.cause, TerminatedError)
        assert "operator stopped it" in caught.value.cause.message
        await client.close()

    asyncio.run(scenario())


def _run_with_worker(stack: Stack, tenant: Tenant, queue: str, script: Any, activities: list[Any]) -> Any:
    """Run ``script`` (blocking, scripted decisions) in a thread while an SDK worker runs."""

    async def scenario() -> Any:
        client = await _client(stack, tenant)
        async with Worker(client, task_queue=queue, activities=activities):
            outcome = await asyncio.to_thread(script)
        await client.close()
        return outcome

    return asyncio.run(scenario())


def test_async_activity_result_reaches_the_workflow(
    stack: Stack, tenant: Tenant, api: Api, worker: ScriptedWorker
) -> None:
    def script() -> dict[str, Any]:
        api.start(_wid(), worker.queue)
        _schedule(worker, "Greet", "ada")
        return _activity_outcome(worker)

    event = _run_with_worker(stack, tenant, worker.queue, script, [greet])
    assert event["event_type"] == "ActivityTaskCompleted"
    assert event["attributes"]["result"] == [payload("hello ada (attempt 1)")]


def test_non_retryable_sync_activity_failure_is_not_retried(
    stack: Stack, tenant: Tenant, api: Api, worker: ScriptedWorker
) -> None:
    def script() -> dict[str, Any]:
        api.start(_wid(), worker.queue)
        _schedule(worker, "refuse", 30, retry_policy={"maximum_attempts": 5, "initial_interval": 0.1})
        return _activity_outcome(worker)

    event = _run_with_worker(stack, tenant, worker.queue, script, [refuse])
    assert event["event_type"] == "ActivityTaskFailed"
    failure = event["attributes"]["failure"]
    assert failure["message"] == "card declined for 30"
    assert failure["application_failure_info"]["type"] == "Declined"
    assert failure["application_failure_info"]["non_retryable"] is True


cancel_seen = threading.Event()
activity_running = threading.Event()


@activity.defn
def wait_for_cancel() -> str:
    activity_running.set()
    while not activity.is_cancelled():
        activity.heartbeat("working")
        activity.wait_for_cancelled_sync(0.1)
    cancel_seen.set()
    raise CancelledError("stopped on request")


@activity.defn
async def wait_for_cancel_async() -> str:
    activity_running.set()
    try:
        while True:
            activity.heartbeat("working")
            await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        assert activity.is_cancelled()
        cancel_seen.set()
        raise


@pytest.mark.parametrize("sleeper", [wait_for_cancel, wait_for_cancel_async], ids=["sync", "async"])
def test_cancel_reaches_a_heartbeating_activity(
    stack: Stack, tenant: Tenant, api: Api, worker: ScriptedWorker, sleeper: Any
) -> None:
    cancel_seen.clear()
    activity_running.clear()

    def script() -> dict[str, Any]:
        wid = _wid()
        api.start(wid, worker.queue)
        _schedule(worker, sleeper.__name__, heartbeat_timeout=2)
        # The cancel must find the activity running (one not started yet is canceled at once).
        assert activity_running.wait(20)
        api.post(f"/workflows/{wid}/signal", {"signal_name": "stop"})
        task = worker.poll_workflow_task(timeout=20)
        scheduled = next(
            e["event_id"] for e in task["history"]["events"] if e["event_type"] == "ActivityTaskScheduled"
        )
        r = worker.complete_workflow_task(
            task, command("RequestCancelActivityTask", scheduled_event_id=scheduled)
        )
        assert r.status_code == 200, r.text
        return _activity_outcome(worker)

    event = _run_with_worker(stack, tenant, worker.queue, script, [sleeper])
    assert cancel_seen.is_set()
    assert event["event_type"] == "ActivityTaskCanceled"


@workflow.defn
class Approval:
    """Greets, then waits for an approval signal; a query reports the state meanwhile."""

    def __init__(self) -> None:
        self.state = "new"
        self.approver = ""

    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=10))
        self.state = "waiting"
        await workflow.wait_condition(lambda: bool(self.approver))
        return f"{greeting}; approved by {self.approver}"

    @workflow.signal
    def approve(self, who: str) -> None:
        self.approver = who

    @workflow.query
    def status(self) -> str:
        return self.state


def test_workflow_runs_activity_signal_and_query_end_to_end(stack: Stack, tenant: Tenant, queue: str) -> None:
    async def scenario() -> None:
        client = await _client(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[Approval], activities=[greet]):
            handle = await client.start_workflow(Approval.run, "ada", id=_wid(), task_queue=queue)
            for _ in range(100):
                if await handle.query(Approval.status) == "waiting":
                    break
                await asyncio.sleep(0.1)
            assert await handle.query(Approval.status) == "waiting"
            await handle.signal(Approval.approve, "grace")
            assert await handle.result() == "hello ada (attempt 1); approved by grace"
        events = [e["event_type"] async for e in handle.fetch_history_events()]
        assert "ActivityTaskCompleted" in events and events[-1] == "WorkflowExecutionCompleted"
        history = await handle.fetch_history()
        restored = WorkflowHistory.from_json(history.to_json())
        assert Replayer(workflows=[Approval]).replay_workflow(restored).replay_failure is None
        await client.close()

    asyncio.run(scenario())


def test_the_examples_run_on_a_worker(stack: Stack, tenant: Tenant, queue: str) -> None:
    from examples import approval, catalog, fan_out, order_fulfilment

    async def scenario() -> None:
        client = await _client(stack, tenant)
        worker = Worker(
            client,
            task_queue=queue,
            workflows=catalog.WORKFLOWS,
            activities=catalog.ACTIVITIES,
        )
        async with worker:
            total = await client.execute_workflow(fan_out.FanOut.run, 5, id=_wid(), task_queue=queue)
            assert total == 0 + 1 + 4 + 9 + 16
            order = await client.start_workflow(
                order_fulfilment.OrderFulfilment.run, "o-1", id=_wid(), task_queue=queue
            )
            await order.signal(order_fulfilment.OrderFulfilment.cancel_order)
            assert await order.result() == "refunded charge-o-1"
            flow = await client.start_workflow(approval.Approval.run, "expense", id=_wid(), task_queue=queue)
            await flow.signal(approval.Approval.approve, "grace")
            assert await flow.result() == "expense approved by grace"
            assert await flow.query(approval.Approval.status) == "approved by grace"
        await client.close()

    asyncio.run(scenario())


@activity.defn
async def flaky_lookup(key: str) -> str:
    if activity.info().attempt < 3:
        raise RuntimeError("lookup service busy")
    return f"{key}=found on attempt {activity.info().attempt}"


@workflow.defn
class LocalLookup:
    @workflow.run
    async def run(self, key: str) -> str:
        found: str = await workflow.execute_local_activity(
            flaky_lookup,
            key,
            start_to_close_timeout=timedelta(seconds=5),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50)),
        )
        return found


def test_local_activity_retries_in_the_worker_and_is_recorded_as_a_marker(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        client = await _client(stack, tenant)
        async with Worker(client, task_queue=queue, workflows=[LocalLookup], activities=[flaky_lookup]):
            handle = await client.start_workflow(LocalLookup.run, "k", id=_wid(), task_queue=queue)
            assert await handle.result() == "k=found on attempt 3"
        events = [e["event_type"] async for e in handle.fetch_history_events()]
        assert "MarkerRecorded" in events and "ActivityTaskScheduled" not in events
        await client.close()

    asyncio.run(scenario())


def test_server_refusals_map_to_sdk_errors(stack: Stack, tenant: Tenant, queue: str) -> None:
    async def scenario() -> None:
        client = await _client(stack, tenant)
        with pytest.raises(NotFoundError):
            await client.get_workflow_handle("no-such-workflow").describe()
        wid = _wid()
        await client.start_workflow("Order", id=wid, task_queue=queue)
        with pytest.raises(WorkflowAlreadyStartedError) as caught:
            await client.start_workflow(
                "Order", id=wid, task_queue=queue, id_conflict_policy=WorkflowIDConflictPolicy.FAIL
            )
        assert caught.value.workflow_id == wid
        await client.close()

    asyncio.run(scenario())


def test_a_new_worker_replays_a_run_another_worker_left_waiting(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    async def scenario() -> None:
        client = await _client(stack, tenant)
        short_sticky = timedelta(seconds=1)
        async with Worker(
            client,
            task_queue=queue,
            workflows=[Approval],
            activities=[greet],
            sticky_queue_schedule_to_start_timeout=short_sticky,
        ):
            handle = await client.start_workflow(Approval.run, "lin", id=_wid(), task_queue=queue)
            for _ in range(100):
                if await handle.query(Approval.status) == "waiting":
                    break
                await asyncio.sleep(0.1)
        await handle.signal(Approval.approve, "max")
        async with Worker(client, task_queue=queue, workflows=[Approval], activities=[greet]):
            assert await handle.result() == "hello lin (attempt 1); approved by max"
        await client.close()

    asyncio.run(scenario())


def test_demo_worker_process_hosts_the_examples(stack: Stack, tenant: Tenant) -> None:
    env = {
        **stack.env,
        "CHRONICLE_URL": stack.url,
        "CHRONICLE_NAMESPACE": tenant.namespace,
        "CHRONICLE_API_KEY": tenant.keys["all"],
    }
    demo = subprocess.Popen([sys.executable, "-m", "chronicle.demo_worker"], cwd=ROOT, env=env)
    try:

        async def scenario() -> int:
            client = await _client(stack, tenant)
            total: int = await client.execute_workflow("FanOut", 4, id=_wid(), task_queue="demo")
            await client.close()
            return total

        assert asyncio.run(scenario()) == 0 + 1 + 4 + 9
    finally:
        demo.terminate()
    assert demo.wait(20) == 0  # SIGTERM shuts the worker down gracefully
