"""Continue-as-new end to end: long chains on a real SDK worker, the links between runs,
the server's suggestion to continue, the minimal interval, and signals during the closing task."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from sdk import workflow
from sdk.client import Client
from sdk.common import RetryPolicy
from sdk.worker import Worker
from tests.conftest import Api, ScriptedWorker, Stack, Tenant, command, wait_until

CHAIN = 50


def _wid() -> str:
    return f"can-{uuid.uuid4().hex[:8]}"


@workflow.defn
class Relay:
    """Passes a baton through ``hops`` runs; the last run reports what it inherited."""

    @workflow.run
    async def run(self, hops: int, carried: int) -> dict[str, Any]:
        if hops > 1:
            workflow.continue_as_new(args=[hops - 1, carried + 1])
        info = workflow.info()
        return {
            "carried": carried + 1,
            "memo": workflow.memo(),
            "search_attributes": info.search_attributes,
            "retry_policy": info.retry_policy.to_wire() if info.retry_policy else None,
            "first_execution_run_id": info.first_execution_run_id,
            "continued_run_id": info.continued_run_id,
            "task_queue": info.task_queue,
        }


@workflow.defn
class Grower:
    """Sleeps in short steps until the server suggests continuing as new, then does so once."""

    @workflow.run
    async def run(self, steps_before: int) -> dict[str, int]:
        if steps_before:
            return {"steps": steps_before, "length_now": workflow.info().get_current_history_length()}
        steps = 0
        while not workflow.info().is_continue_as_new_suggested():
            await workflow.sleep(timedelta(milliseconds=10))
            steps += 1
        workflow.continue_as_new(steps)


_slow_close = threading.Event()


@workflow.defn
class Collector:
    """Gathers signalled items, then hands them to a fresh run; the first close is slow."""

    def __init__(self) -> None:
        self.items: list[str] = []

    @workflow.signal
    def add(self, item: str) -> None:
        self.items.append(item)

    @workflow.run
    async def run(self, carried: list[str]) -> list[str]:
        if carried:
            return carried
        await workflow.wait_condition(lambda: bool(self.items))
        if not _slow_close.is_set():
            _slow_close.set()
            # Hold the closing task open while the test signals again: a deliberate blocking
            # call, which the determinism guard refuses in workflow code unless lifted.
            with workflow.unsafe.sandbox_unrestricted():
                time.sleep(1.5)
        workflow.continue_as_new(list(self.items))


async def _with_worker(
    stack: Stack, tenant: Tenant, queue: str, workflows: Sequence[type], body: Callable[[Client], Any]
) -> Any:
    client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
    async with Worker(client, task_queue=queue, workflows=workflows):
        outcome = await asyncio.wait_for(body(client), 120)
    await client.close()
    return outcome


def _run(api: Api, wid: str, run_id: str) -> dict[str, Any]:
    r = api.get(f"/workflows/{wid}/runs/{run_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _run_events(api: Api, wid: str, run_id: str) -> list[dict[str, Any]]:
    r = api.get(f"/workflows/{wid}/runs/{run_id}/history", page_size=256)
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def _chain(api: Api, wid: str, first_run: str) -> list[dict[str, Any]]:
    runs = [_run(api, wid, first_run)]
    while runs[-1]["new_run_id"]:
        runs.append(_run(api, wid, runs[-1]["new_run_id"]))
    return runs


def test_a_chain_of_fifty_runs_carries_options_and_result_follows_it(
    stack: Stack, make_tenant: Callable[..., Tenant], queue: str
) -> None:
    tenant = make_tenant(workflow_id_reuse_minimal_interval=0)
    api = Api(stack, tenant)
    registered = api.post("/search-attributes", {"name": "CustomKeywordField", "type": "Keyword"})
    assert registered.status_code == 201, registered.text
    wid = _wid()
    policy = RetryPolicy(maximum_attempts=2)

    async def body(client: Client) -> tuple[dict[str, Any], str]:
        handle = await client.start_workflow(
            Relay.run,
            args=[CHAIN, 0],
            id=wid,
            task_queue=queue,
            memo={"owner": "billing"},
            search_attributes={"CustomKeywordField": ["relay"]},
            retry_policy=policy,
            execution_timeout=timedelta(minutes=10),
        )
        return await handle.result(), handle.run_id or ""

    result, first_run = asyncio.run(_with_worker(stack, tenant, queue, [Relay], body))
    assert result["carried"] == CHAIN
    assert result["memo"] == {"owner": {"metadata": {"encoding": "json/plain"}, "data": "billing"}}
    assert result["search_attributes"] == {"CustomKeywordField": "relay"}  # stored typed
    assert result["retry_policy"] == policy.to_wire()
    assert result["first_execution_run_id"] == first_run
    assert result["task_queue"] == queue

    runs = _chain(api, wid, first_run)
    assert len(runs) == CHAIN
    assert [r["status"] for r in runs] == ["ContinuedAsNew"] * (CHAIN - 1) + ["Completed"]
    assert {r["first_run_id"] for r in runs} == {first_run}
    assert runs[0]["previous_run_id"] is None
    for earlier, later in itertools.pairwise(runs):
        assert later["previous_run_id"] == earlier["run_id"]
    assert result["continued_run_id"] == runs[-2]["run_id"]
    assert api.describe(wid)["run_id"] == runs[-1]["run_id"]  # the latest run is the current one

    closing = _run_events(api, wid, first_run)[-1]
    assert closing["event_type"] == "WorkflowExecutionContinuedAsNew"
    attrs = closing["attributes"]
    assert attrs["new_execution_run_id"] == runs[1]["run_id"]
    assert attrs["initiator"] == "WORKFLOW"
    assert attrs["workflow_type"] == {"name": "Relay"} and attrs["task_queue"] == {"name": queue}
    assert attrs["memo"] == runs[0]["memo"] and attrs["search_attributes"] == {"CustomKeywordField": "relay"}
    assert attrs["workflow_task_completed_event_id"] == closing["event_id"] - 1

    started = _run_events(api, wid, runs[1]["run_id"])[0]["attributes"]
    assert started["continued_execution_run_id"] == first_run
    assert started["first_execution_run_id"] == first_run
    assert started["initiator"] == "WORKFLOW" and started["attempt"] == 1
    # The execution timeout spans the chain: later runs get only what is left of it.
    assert started["workflow_execution_timeout"] == 600
    last_started = _run_events(api, wid, runs[-1]["run_id"])[0]["attributes"]
    assert 0 < last_started["workflow_run_timeout"] < started["workflow_run_timeout"] <= 600


def test_the_suggestion_turns_true_at_the_namespace_threshold(
    stack: Stack, make_tenant: Callable[..., Tenant], queue: str
) -> None:
    threshold = 25
    tenant = make_tenant(
        history_suggest_continue_as_new_events=threshold, workflow_id_reuse_minimal_interval=0
    )
    api = Api(stack, tenant)
    wid = _wid()

    async def body(client: Client) -> tuple[dict[str, int], str]:
        handle = await client.start_workflow(Grower.run, 0, id=wid, task_queue=queue)
        return await handle.result(), handle.run_id or ""

    result, first_run = asyncio.run(_with_worker(stack, tenant, queue, [Grower], body))
    assert result["steps"] >= 3
    assert result["length_now"] < threshold  # the fresh run starts below the threshold again
    events = _run_events(api, wid, first_run)
    started = [e for e in events if e["event_type"] == "WorkflowTaskStarted"]
    suggested = [e for e in started if e["attributes"]["suggest_continue_as_new"]]
    assert suggested, "no workflow task carried the suggestion"
    first_suggested = suggested[0]
    assert first_suggested["event_id"] >= threshold
    assert all(e["event_id"] < threshold for e in started if e not in suggested)
    assert first_suggested["attributes"]["suggest_continue_as_new_reasons"] == [
        "SUGGEST_CONTINUE_AS_NEW_REASON_TOO_MANY_HISTORY_EVENTS"
    ]
    assert first_suggested["attributes"]["history_size_bytes"] > 0
    assert events[-1]["event_type"] == "WorkflowExecutionContinuedAsNew"


def test_default_namespace_spaces_runs_at_least_a_second_apart(
    stack: Stack, tenant: Tenant, api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    first = api.start(wid, worker.queue)["run_id"]
    task = worker.poll_workflow_task()
    r = worker.complete_workflow_task(task, command("ContinueAsNewWorkflowExecution", input=[]))
    assert r.status_code == 200, r.text
    new_run = _run(api, wid, first)["new_run_id"]
    assert _run_events(api, wid, first)[-1]["attributes"]["backoff_start_interval"] == 0  # as asked
    started = _run_events(api, wid, new_run)
    backoff = started[0]["attributes"]["first_workflow_task_backoff"]
    assert 0 < backoff <= 1.0  # as enforced
    assert [e["event_type"] for e in started] == ["WorkflowExecutionStarted"]  # held back
    task = worker.poll_workflow_task()
    assert task["workflow_execution"]["run_id"] == new_run


def test_a_signal_during_the_closing_task_is_not_lost(
    stack: Stack, tenant: Tenant, api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    first = api.start(wid, worker.queue)["run_id"]
    task = worker.poll_workflow_task()
    r = api.post(f"/workflows/{wid}/signal", {"signal_name": "late", "input": [1]})
    assert r.status_code == 200, r.text
    r = worker.complete_workflow_task(task, command("ContinueAsNewWorkflowExecution", input=[]))
    assert r.status_code == 200, r.text
    # Like Temporal: the completion fails with UNHANDLED_COMMAND and the run goes on.
    run = _run(api, wid, first)
    assert run["status"] == "Running" and run["new_run_id"] is None
    types = [e["event_type"] for e in _run_events(api, wid, first)]
    assert types[-3:] == ["WorkflowTaskFailed", "WorkflowExecutionSignaled", "WorkflowTaskScheduled"]
    failed = _run_events(api, wid, first)[-3]["attributes"]
    assert failed["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND"

    retry = worker.poll_workflow_task()
    assert "WorkflowExecutionSignaled" in [e["event_type"] for e in retry["history"]["events"]]
    r = worker.complete_workflow_task(retry, command("ContinueAsNewWorkflowExecution", input=["seen"]))
    assert r.status_code == 200, r.text
    new_run = _run(api, wid, first)["new_run_id"]
    assert new_run
    # A signal after the close goes to the new run, now the current one.
    r = api.post(f"/workflows/{wid}/signal", {"signal_name": "later", "input": []})
    assert r.status_code == 200, r.text
    wait_until(
        lambda: "WorkflowExecutionSignaled" in [e["event_type"] for e in _run_events(api, wid, new_run)]
    )


def test_bad_continue_as_new_attributes_fail_the_task_not_the_run(
    stack: Stack, tenant: Tenant, api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    first = api.start(wid, worker.queue)["run_id"]
    task = worker.poll_workflow_task()
    bad = command("ContinueAsNewWorkflowExecution", input=[], cron_schedule="every tuesday")
    r = worker.complete_workflow_task(task, bad)
    assert r.status_code == 200, r.text
    events = _run_events(api, wid, first)
    failed = [e for e in events if e["event_type"] == "WorkflowTaskFailed"][-1]["attributes"]
    assert failed["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_BAD_CONTINUE_AS_NEW_ATTRIBUTES"
    assert "cron_schedule" in failed["failure"]["message"]
    assert _run(api, wid, first)["status"] == "Running"
    r = api.get("/workflows", query=f"WorkflowId = '{wid}'")
    assert len(r.json()["executions"]) == 1  # no second run was created


def test_an_sdk_worker_sees_a_signal_that_arrived_during_its_closing_task(
    stack: Stack, make_tenant: Callable[..., Tenant], queue: str
) -> None:
    tenant = make_tenant(workflow_id_reuse_minimal_interval=0)
    api = Api(stack, tenant)
    wid = _wid()

    def signal_while_closing() -> None:
        wait_until(lambda: "WorkflowTaskStarted" in api.event_types(wid), timeout=30)
        r = api.post(f"/workflows/{wid}/signal", {"signal_name": "add", "input": [_payload("b")]})
        assert r.status_code == 200, r.text

    async def body(client: Client) -> tuple[list[str], str]:
        handle = await client.start_workflow(
            Collector.run, [], id=wid, task_queue=queue, start_signal="add", start_signal_args=["a"]
        )
        await asyncio.to_thread(signal_while_closing)
        return await handle.result(), handle.run_id or ""

    result, first_run = asyncio.run(_with_worker(stack, tenant, queue, [Collector], body))
    assert result == ["a", "b"]  # nothing lost: the new run got both items
    events = _run_events(api, wid, first_run)
    failed = [e for e in events if e["event_type"] == "WorkflowTaskFailed"]
    assert [f["attributes"]["cause"] for f in failed] == ["WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND"]
    assert events[-1]["event_type"] == "WorkflowExecutionContinuedAsNew"


def _payload(value: Any) -> dict[str, Any]:
    return {"metadata": {"encoding": "json/plain"}, "data": value}
