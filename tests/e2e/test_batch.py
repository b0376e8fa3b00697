"""Batch operations by query against real processes: the frontend, a shard owner and
the batch runner of the ``stack`` fixture.

Jobs cover the runs their query matched when created, report progress as they go,
record per-run failures, can be re-rated and stopped, and resume after the runner is
killed without applying any run twice.
"""

from __future__ import annotations

import signal
import time
import uuid
from typing import Any

from tests.conftest import Api, ScriptedWorker, Stack, wait_until


def _idle_runs(api: Api, worker: ScriptedWorker, count: int, workflow_type: str) -> list[str]:
    """Start ``count`` runs and complete their first workflow task with no commands."""
    wids = [f"{workflow_type}-{i}-{uuid.uuid4().hex[:6]}" for i in range(count)]
    for wid in wids:
        api.start(wid, worker.queue, workflow_type=workflow_type)
    for _ in wids:
        assert worker.complete_workflow_task(worker.poll_workflow_task()).status_code == 200
    return wids


def _start_job(api: Api, **body: Any) -> dict[str, Any]:
    r = api.post("/batch-operations", {"reason": "ops cleanup", **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


def _job(api: Api, job_id: str) -> dict[str, Any]:
    r = api.get(f"/batch-operations/{job_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _watch_until_finished(api: Api, job_id: str, timeout: float = 180) -> tuple[dict[str, Any], list[int]]:
    """Poll the job until it leaves Running; return it and the progress counts seen on the way."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        job = _job(api, job_id)
        seen.append(job["done"] + job["failed"])
        if job["state"] != "Running":
            return job, seen
        assert time.monotonic() < deadline, f"job still running: {job}"
        time.sleep(0.1)


def _settled(api: Api, job_id: str) -> dict[str, Any] | None:
    """The job, once it reads the same twice 1.5 s apart."""
    first = _job(api, job_id)
    time.sleep(1.5)
    return first if _job(api, job_id) == first else None


def _count(api: Api, *, workflow_type: str, status: str) -> int:
    query = f"WorkflowType = '{workflow_type}' AND ExecutionStatus = '{status}'"
    return int(api.get("/workflow-count", query=query).json()["count"])


def test_a_batch_reset_of_200_runs_completes_with_progress_and_records_failures(
    api: Api, worker: ScriptedWorker
) -> None:
    wids = _idle_runs(api, worker, 200, "Reset200")
    unresettable = [f"fresh-{i}-{uuid.uuid4().hex[:6]}" for i in range(5)]
    for wid in unresettable:  # no workflow task has completed: nothing to reset to
        api.start(wid, worker.queue, workflow_type="Reset200")
    query = "WorkflowType = 'Reset200' AND ExecutionStatus = 'Running'"

    r = api.post("/batch-operations", {"operation": "reset", "query": query, "reason": "x", "dry_run": True})
    assert r.status_code == 200, r.text
    assert r.json()["count"] == 205 and len(r.json()["executions"]) == 20
    assert api.get("/batch-operations").json()["jobs"] == []  # a dry run creates nothing

    job = _start_job(
        api, operation="reset", query=query, reset_type="FirstWorkflowTask", rps=200, job_id="r200"
    )
    assert job["total"] == 205 and job["state"] == "Running"
    job, seen = _watch_until_finished(api, "r200")
    assert job["state"] == "Completed" and job["progress"] == 1.0
    assert (job["done"], job["failed"]) == (200, 5)
    assert seen == sorted(seen) and any(0 < n < 205 for n in seen), seen
    assert sorted(f["workflow_id"] for f in job["failures"]) == sorted(unresettable)
    assert {f["code"] for f in job["failures"]} == {"invalid_argument"}

    # Each reset run is the workflow id's current run; its base was terminated by the reset.
    for wid in wids[:: len(wids) // 10]:
        current = api.describe(wid)
        assert current["status"] == "Running" and current["reset_base_run_id"]
        base = api.get(f"/workflows/{wid}/runs/{current['reset_base_run_id']}").json()
        assert base["status"] == "Terminated" and base["reset_run_id"] == current["run_id"]
    # The job's own new runs matched its query but were not part of it: one reset per workflow id.
    assert _count(api, workflow_type="Reset200", status="Terminated") == 200
    assert _count(api, workflow_type="Reset200", status="Running") == 205


def test_a_batch_can_be_re_rated_and_stopped_mid_way(api: Api, worker: ScriptedWorker) -> None:
    _idle_runs(api, worker, 40, "Slow")
    _start_job(api, operation="reset", query="WorkflowType = 'Slow'", rps=5, job_id="slow")
    wait_until(lambda: _job(api, "slow")["done"] >= 3, timeout=20)
    r = api.http.patch(api.base + "/batch-operations/slow", json={"rps": 8})
    assert r.status_code == 200 and r.json()["rps"] == 8
    r = api.post("/batch-operations/slow/stop", {"reason": "wrong query"})
    assert r.status_code == 200 and r.json()["state"] == "Stopped"
    # The runner finishes the chunk in hand, records it and takes no more.
    stopped = wait_until(lambda: _settled(api, "slow"), timeout=30)
    assert stopped["state"] == "Stopped" and stopped["stop_reason"] == "wrong query"
    assert 3 <= stopped["done"] < 40 and stopped["finished_at"]
    assert _count(api, workflow_type="Slow", status="Terminated") == stopped["done"]
    assert _count(api, workflow_type="Slow", status="Running") == 40
    # A stopped job frees the namespace for the next one.
    _start_job(api, operation="terminate", query="ExecutionStatus = 'Running'", job_id="rest")
    assert _watch_until_finished(api, "rest")[0]["done"] == 40


def test_batch_terminate_cancel_and_signal(api: Api, worker: ScriptedWorker) -> None:
    signalled = _idle_runs(api, worker, 20, "Nudge")
    _start_job(api, operation="signal", query="WorkflowType = 'Nudge'", signal_name="nudge", signal_input=[7])
    job, _ = _watch_until_finished(api, _job_id(api))
    assert (job["state"], job["done"], job["failed"]) == ("Completed", 20, 0)
    for wid in signalled:
        [event] = [e for e in api.events(wid) if e["event_type"] == "WorkflowExecutionSignaled"]
        assert event["attributes"]["signal_name"] == "nudge" and event["attributes"]["input"] == [7]
        assert event["attributes"]["identity"].startswith("batch:")

    _start_job(api, operation="cancel", query="WorkflowType = 'Nudge'")
    job, _ = _watch_until_finished(api, _job_id(api))
    assert (job["done"], job["failed"]) == (20, 0)
    assert all(api.describe(w)["status"] == "Running" for w in signalled)  # cancel asks the workflow
    assert all("WorkflowExecutionCancelRequested" in api.event_types(w) for w in signalled)

    _start_job(api, operation="terminate", query="WorkflowType = 'Nudge'", job_id="end-nudge")
    job, _ = _watch_until_finished(api, "end-nudge")
    assert (job["done"], job["failed"]) == (20, 0)
    assert all(api.event_types(w)[-1] == "WorkflowExecutionTerminated" for w in signalled)
    assert api.events(signalled[0])[-1]["attributes"]["reason"] == "ops cleanup"


def _job_id(api: Api) -> str:
    return str(api.get("/batch-operations").json()["jobs"][0]["job_id"])


def test_a_killed_runner_is_replaced_and_no_run_is_signalled_twice(
    stack: Stack, api: Api, worker: ScriptedWorker
) -> None:
    wids = _idle_runs(api, worker, 60, "Crash")
    _start_job(
        api, operation="signal", query="WorkflowType = 'Crash'", signal_name="once", rps=15, job_id="crash"
    )
    wait_until(lambda: _job(api, "crash")["done"] >= 15, timeout=20)
    [runner] = [p for p in stack.processes if "run_batch_jobs" in p.args and p.poll() is None]
    runner.send_signal(signal.SIGKILL)
    runner.wait(10)
    at_kill = _job(api, "crash")
    assert at_kill["state"] == "Running" and at_kill["done"] < 60
    stack.start_batch_runner("test-batch-runner-2")  # takes the job once the dead runner's lease expires
    job, _ = _watch_until_finished(api, "crash")
    assert (job["state"], job["done"], job["failed"]) == ("Completed", 60, 0)
    for wid in wids:
        assert api.event_types(wid).count("WorkflowExecutionSignaled") == 1, wid


def test_bad_batch_requests_get_a_clear_4xx(api: Api, worker: ScriptedWorker) -> None:
    _idle_runs(api, worker, 2, "Bad")
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"operation": "reset", "query": "WorkflowType ~ 'Bad'"}, 400, "unexpected character '~'"),
        ({"operation": "reset", "query": "Owner = 'me'"}, 400, "unknown search attribute 'Owner'"),
        ({"operation": "reset", "query": "StartTime > 'yesterday'"}, 400, "RFC 3339"),
        ({"operation": "reset", "query": "ExecutionStatus = 'Asleep'"}, 400, "is not one of Running"),
        ({"operation": "signal", "query": ""}, 400, "signal_name"),
        ({"operation": "reset", "query": "", "reset_type": "BuildId"}, 400, "reset_type"),
        ({"operation": "delete", "query": ""}, 400, "operation"),
        ({"operation": "terminate", "query": "", "rps": 0}, 400, "rps"),
        ({"operation": "terminate", "query": "", "reason": ""}, 400, "reason"),
    ]
    for body, status, mentions in cases:
        r = api.post("/batch-operations", {"reason": "x", **body})
        assert r.status_code == status and mentions in r.text, (body, r.text)
    assert api.get("/batch-operations").json()["jobs"] == []

    _start_job(api, operation="terminate", query="WorkflowType = 'Bad'", rps=0.5, job_id="first")
    r = api.post("/batch-operations", {"operation": "cancel", "query": "", "reason": "x"})
    assert r.status_code == 409 and "running" in r.json()["message"]
    r = api.post("/batch-operations", {"operation": "cancel", "query": "", "reason": "x", "job_id": "first"})
    assert r.status_code == 409 and "already exists" in r.json()["message"]
    assert api.get("/batch-operations/nope").status_code == 404
    assert api.http.patch(api.base + "/batch-operations/first", json={"rps": -1}).status_code == 400
    assert api.post("/batch-operations/first/stop").json()["state"] == "Stopped"
