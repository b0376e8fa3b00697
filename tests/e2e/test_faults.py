"""Crash windows: a frontend killed after commit but before its reply loses nothing."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from tests.conftest import ROOT, Api, ScriptedWorker, Stack, Tenant, command, free_port, wait_until


@pytest.fixture
def crashing_frontend(stack: Stack) -> Iterator[str]:
    """A single-process frontend that dies right after committing a start."""
    yield from _frontend_crashing_at(stack, "after_commit_before_reply")


@pytest.fixture(params=["before_commit", "after_commit_before_reply"])
def crash_point(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def frontend_crashing(stack: Stack, crash_point: str) -> Iterator[str]:
    """A single-process frontend that dies at ``crash_point`` of the first write it makes."""
    yield from _frontend_crashing_at(stack, crash_point)


def _frontend_crashing_at(stack: Stack, point: str) -> Iterator[str]:
    """A single-process frontend that dies at ``point`` of the first write that reaches it."""
    port = free_port()
    env = {**stack.env, "CHRONICLE_FAULTS": point}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "chronicle.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/api/schema/", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout=30)
        yield url
    finally:
        proc.kill()
        proc.wait()


def test_start_committed_before_a_crash_is_found_by_its_retry(
    crashing_frontend: str, api: Api, tenant: Tenant
) -> None:
    wid = f"crash-{uuid.uuid4().hex[:8]}"
    body = {"workflow_id": wid, "workflow_type": "T", "task_queue": "q", "request_id": "req-1"}
    headers = {"Authorization": f"Bearer {tenant.keys['all']}"}
    with pytest.raises(httpx.HTTPError):
        httpx.post(
            f"{crashing_frontend}/api/v1/namespaces/{tenant.namespace}/workflows",
            json=body,
            headers=headers,
            timeout=10,
        )

    retried = api.post("/workflows", body)  # the client retries on a healthy frontend

    assert retried.status_code == 201, retried.text
    runs = api.get("/workflows", query=f"WorkflowId = '{wid}'").json()["executions"]
    assert len(runs) == 1 and runs[0]["run_id"] == retried.json()["run_id"]


def test_a_task_run_ahead_with_its_result_is_written_once_whatever_the_crash(
    frontend_crashing: str, api: Api, tenant: Tenant, queue: str, crash_point: str
) -> None:
    """The result and the task run ahead are one transaction: a frontend killed before its
    commit wrote nothing (the report, sent again, is taken whole); killed after it, the
    report sent again is refused as stale and nothing is written twice."""
    worker = ScriptedWorker(api, queue)
    wid = f"ahead-{uuid.uuid4().hex[:8]}"
    assert (
        api.post("/workflows", {"workflow_id": wid, "workflow_type": "T", "task_queue": queue}).status_code
        == 201
    )
    sticky = f"{queue}-sticky"
    schedule = command(
        "ScheduleActivityTask",
        activity_id="a1",
        activity_type="Charge",
        start_to_close_timeout=30,
        request_eager_execution=True,
    )
    done = worker.complete_workflow_task(
        worker.poll_workflow_task(), schedule, sticky_task_queue=sticky, return_recorded_events=True
    )
    assert done.status_code == 200, done.text
    activity = done.json()["activity_tasks"][0]
    report = {
        "task_token": activity["task_token"],
        "result": 5,
        "identity": worker.identity,
        "return_new_workflow_task": True,
        "sticky_task_queue": sticky,
        "workflow_task_ahead": {
            "expected_event_id": done.json()["recorded_events"][-1]["event_id"] + 1,
            "started_time": datetime.now(UTC).isoformat(),
            "commands": [command("CompleteWorkflowExecution", result=5)],
        },
    }
    url = f"/api/v1/namespaces/{tenant.namespace}/task-queues/{queue}/activity-tasks/complete"
    headers = {"Authorization": f"Bearer {tenant.keys['all']}"}
    with pytest.raises(httpx.HTTPError):
        httpx.post(frontend_crashing + url, json=report, headers=headers, timeout=10)

    again = api.post(f"/task-queues/{queue}/activity-tasks/complete", report)

    kinds = api.event_types(wid)
    if crash_point == "before_commit":
        assert again.status_code == 200, again.text
        assert "workflow_task_ahead" in again.json(), "nothing was written: the report is taken whole"
    else:
        assert again.status_code == 404, again.text  # stale: the first report was committed
    assert kinds.count("ActivityTaskCompleted") == 1 and kinds.count("WorkflowExecutionCompleted") == 1
    assert api.describe(wid)["status"] == "Completed"


def test_completions_written_together_are_written_once_whatever_the_crash(
    frontend_crashing: str, api: Api, tenant: Tenant, queue: str, crash_point: str
) -> None:
    """A report batch's completions of several runs are one transaction: a frontend killed
    before its commit wrote none of them (the batch, sent again, completes each run); killed
    after it, the batch sent again is refused call by call as stale, and no run closes twice."""
    worker = ScriptedWorker(api, queue)
    wids = [f"together-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    for wid in wids:
        started = api.post("/workflows", {"workflow_id": wid, "workflow_type": "T", "task_queue": queue})
        assert started.status_code == 201, started.text
    tasks = [worker.poll_workflow_task() for _ in wids]
    batch = {
        "responses": [
            {
                "kind": "workflow-tasks/complete",
                "body": {
                    "task_token": t["task_token"],
                    "commands": [command("CompleteWorkflowExecution", result=1)],
                },
            }
            for t in tasks
        ]
    }
    url = f"/api/v1/namespaces/{tenant.namespace}/task-queues/{queue}/responses"
    headers = {"Authorization": f"Bearer {tenant.keys['all']}"}
    with pytest.raises(httpx.HTTPError):
        httpx.post(frontend_crashing + url, json=batch, headers=headers, timeout=10)

    again = api.post(f"/task-queues/{queue}/responses", batch)

    assert again.status_code == 200, again.text
    statuses = [answer["status"] for answer in again.json()["responses"]]
    assert statuses == ([200] * 3 if crash_point == "before_commit" else [404] * 3)
    for wid in wids:
        assert api.event_types(wid).count("WorkflowExecutionCompleted") == 1
        assert api.describe(wid)["status"] == "Completed"
