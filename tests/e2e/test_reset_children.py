"""Reset of a parent with children in flight, against real processes.

A child started before the reset point keeps running and reports its close to the
new run, found through the old run's ``reset_run_id``; a child initiated but not yet
started at the point is started once, however the base run's start duty went.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from typing import Any

from sdk import workflow
from sdk.client import Client
from sdk.worker import Worker
from tests.conftest import Api, ScriptedWorker, Stack, Tenant, command, wait_until


def _wid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@workflow.defn
class Errand:
    """Runs until told ``finish``."""

    def __init__(self) -> None:
        self.word = ""

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: bool(self.word))
        return f"errand {self.word}"

    @workflow.signal
    def finish(self, word: str) -> None:
        self.word = word


@workflow.defn
class Sender:
    """Awaits its errand child and returns what it returned."""

    @workflow.run
    async def run(self, child_id: str) -> str:
        return "sender got " + str(await workflow.execute_child_workflow(Errand.run, id=child_id))


def _run_events(api: Api, wid: str, run_id: str) -> list[dict[str, Any]]:
    r = api.get(f"/workflows/{wid}/runs/{run_id}/history", page_size=256)
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def _runs_of(api: Api, wid: str) -> int:
    r = api.get("/workflows", query=f"WorkflowId = '{wid}'")
    assert r.status_code == 200, r.text
    return len(r.json()["executions"])


def _child_started_then_task_completed(api: Api, wid: str) -> bool:
    types = api.event_types(wid)
    return "ChildWorkflowExecutionStarted" in types and types[-1] == "WorkflowTaskCompleted"


def test_a_running_child_reports_to_the_run_a_reset_made(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    parent_id, child_id = _wid("sender"), _wid("errand")

    async def scenario() -> tuple[str, str, str]:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        try:
            async with Worker(client, task_queue=queue, workflows=[Sender, Errand]):
                handle = await client.start_workflow(Sender.run, child_id, id=parent_id, task_queue=queue)
                await asyncio.to_thread(
                    wait_until, lambda: _child_started_then_task_completed(api, parent_id)
                )
                preview = api.get(f"/workflows/{parent_id}/reset-preview", reset_type="LastWorkflowTask")
                assert preview.status_code == 200, preview.text
                kept = preview.json()["children_kept"]
                assert [c["workflow_id"] for c in kept] == [child_id]
                r = api.post(
                    f"/workflows/{parent_id}/reset", {"reason": "redeploy", "reset_type": "LastWorkflowTask"}
                )
                assert r.status_code == 200, r.text
                new_run = str(r.json()["run_id"])
                await client.get_workflow_handle(child_id).signal(Errand.finish, "done")
                result = await asyncio.wait_for(client.get_workflow_handle(parent_id).result(), 30)
                return handle.run_id or "", new_run, str(result)
        finally:
            await client.close()

    base_run, new_run, result = asyncio.run(scenario())
    assert result == "sender got errand done"
    assert api.describe(parent_id)["run_id"] == new_run
    base = api.get(f"/workflows/{parent_id}/runs/{base_run}").json()
    assert base["status"] == "Terminated"
    assert api.describe(child_id)["status"] == "Completed"  # not terminated by the reset
    assert _runs_of(api, child_id) == 1
    types = [e["event_type"] for e in _run_events(api, parent_id, new_run)]
    assert types.count("ChildWorkflowExecutionCompleted") == 1
    assert types.count("StartChildWorkflowExecutionInitiated") == 1


def test_a_child_initiated_but_not_started_at_the_point_starts_once(
    stack: Stack, api: Api, worker: ScriptedWorker
) -> None:
    parent_id, child_id = _wid("parent"), _wid("child")
    base_run = api.start(parent_id, worker.queue)["run_id"]
    owner = stack.shard_owner  # the shard owner carries the child's start duty
    owner.send_signal(signal.SIGSTOP)
    try:
        task = worker.poll_workflow_task()
        start = command(
            "StartChildWorkflowExecution",
            workflow_id=child_id,
            workflow_type="Child",
            task_queue=worker.queue,
        )
        assert worker.complete_workflow_task(task, start).status_code == 200
        r = api.post(f"/workflows/{parent_id}/signal", {"signal_name": "nudge", "input": []})
        assert r.status_code == 200, r.text
        assert worker.complete_workflow_task(worker.poll_workflow_task()).status_code == 200
        events = api.events(parent_id)
    finally:
        owner.send_signal(signal.SIGCONT)
    point = events[-1]["event_id"]  # the second task's completion: the child is not started before it
    assert "ChildWorkflowExecutionStarted" not in [e["event_type"] for e in events]
    wait_until(lambda: "ChildWorkflowExecutionStarted" in api.event_types(parent_id), 20)
    preview = api.get(f"/workflows/{parent_id}/reset-preview", event_id=point).json()
    assert [c["workflow_id"] for c in preview["children_to_start"]] == [child_id]
    assert preview["children_kept"] == []

    r = api.post(f"/workflows/{parent_id}/reset", {"reason": "redeploy", "event_id": point})
    assert r.status_code == 200, r.text
    new_run = str(r.json()["run_id"])

    def started_on_new_run() -> dict[str, Any] | None:
        found = [
            e
            for e in _run_events(api, parent_id, new_run)
            if e["event_type"] == "ChildWorkflowExecutionStarted"
        ]
        return found[0] if found else None

    started = wait_until(started_on_new_run, 20)
    child = api.describe(child_id)
    assert started["attributes"]["workflow_execution"] == {"workflow_id": child_id, "run_id": child["run_id"]}
    assert child["status"] == "Running"
    assert _runs_of(api, child_id) == 1
    assert "StartChildWorkflowExecutionFailed" not in [
        e["event_type"] for e in _run_events(api, parent_id, new_run)
    ]
    assert base_run != new_run
    r = api.post(f"/workflows/{child_id}/terminate", {"reason": "done"})
    assert r.status_code == 200, r.text


def test_a_child_that_closed_after_the_point_closes_in_the_new_run_at_once(
    stack: Stack, tenant: Tenant, api: Api, queue: str
) -> None:
    parent_id, child_id = _wid("sender"), _wid("errand")

    async def scenario() -> tuple[str, str]:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        try:
            async with Worker(client, task_queue=queue, workflows=[Sender, Errand]):
                handle = await client.start_workflow(Sender.run, child_id, id=parent_id, task_queue=queue)
                await asyncio.to_thread(
                    wait_until, lambda: _child_started_then_task_completed(api, parent_id)
                )
                await client.get_workflow_handle(child_id).signal(Errand.finish, "early")
                assert await handle.result() == "sender got errand early"
                events = api.events(parent_id)
                started = next(e for e in events if e["event_type"] == "ChildWorkflowExecutionStarted")
                point = next(
                    e["event_id"]
                    for e in events
                    if e["event_type"] == "WorkflowTaskCompleted" and e["event_id"] > started["event_id"]
                )
                r = api.post(f"/workflows/{parent_id}/reset", {"reason": "redeploy", "event_id": point})
                assert r.status_code == 200, r.text
                new_run = str(r.json()["run_id"])
                result = await asyncio.wait_for(client.get_workflow_handle(parent_id).result(), 30)
                return new_run, str(result)
        finally:
            await client.close()

    new_run, result = asyncio.run(scenario())
    assert result == "sender got errand early"
    assert api.describe(parent_id)["run_id"] == new_run
    assert _runs_of(api, child_id) == 1
    types = [e["event_type"] for e in _run_events(api, parent_id, new_run)]
    assert types.count("ChildWorkflowExecutionCompleted") == 1
    assert types.index("ChildWorkflowExecutionCompleted") > types.index("WorkflowTaskFailed")


def test_a_signal_without_an_outcome_at_the_point_is_sent_again_and_lands_once(
    stack: Stack, api: Api, worker: ScriptedWorker
) -> None:
    parent_id, target_id = _wid("parent"), _wid("target")
    api.start(target_id, worker.queue + "-idle")
    api.start(parent_id, worker.queue)
    owner = stack.shard_owner  # the shard owner carries the signal's send duty
    owner.send_signal(signal.SIGSTOP)
    try:
        send = command(
            "SignalExternalWorkflowExecution",
            execution={"workflow_id": target_id},
            signal_name="hello",
            input=["there"],
        )
        assert worker.complete_workflow_task(worker.poll_workflow_task(), send).status_code == 200
        r = api.post(f"/workflows/{parent_id}/signal", {"signal_name": "nudge", "input": []})
        assert r.status_code == 200, r.text
        assert worker.complete_workflow_task(worker.poll_workflow_task()).status_code == 200
        events = api.events(parent_id)
    finally:
        owner.send_signal(signal.SIGCONT)
    point = events[-1]["event_id"]  # the second task's completion: the signal has no outcome before it
    assert "ExternalWorkflowExecutionSignaled" not in [e["event_type"] for e in events]
    wait_until(lambda: "ExternalWorkflowExecutionSignaled" in api.event_types(parent_id), 20)
    preview = api.get(f"/workflows/{parent_id}/reset-preview", event_id=point).json()
    assert [(r["kind"], r["workflow_id"]) for r in preview["external_requests_reissued"]] == [
        ("signal", target_id)
    ]

    r = api.post(f"/workflows/{parent_id}/reset", {"reason": "redeploy", "event_id": point})
    assert r.status_code == 200, r.text
    new_run = str(r.json()["run_id"])
    wait_until(
        lambda: "ExternalWorkflowExecutionSignaled"
        in [e["event_type"] for e in _run_events(api, parent_id, new_run)],
        20,
    )
    assert api.event_types(target_id).count("WorkflowExecutionSignaled") == 1
    api.post(f"/workflows/{target_id}/terminate", {"reason": "done"})
