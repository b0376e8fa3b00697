"""Workflow retry policy: a failed or run-timed-out run starts its retry as a new run."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from tests.conftest import Api, ScriptedWorker, command, wait_until


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


def _run_events(api: Api, workflow_id: str, run_id: str) -> list[dict[str, Any]]:
    r = api.get(f"/workflows/{workflow_id}/runs/{run_id}/history", page_size=256)
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def _run(api: Api, workflow_id: str, run_id: str) -> dict[str, Any]:
    r = api.get(f"/workflows/{workflow_id}/runs/{run_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


def _fail_current_task(worker: ScriptedWorker, failure: dict[str, Any]) -> dict[str, Any]:
    task = worker.poll_workflow_task()
    r = worker.complete_workflow_task(task, command("FailWorkflowExecution", failure=failure))
    assert r.status_code == 200, r.text
    return task


def _closed_run(api: Api, workflow_id: str, run_id: str, timeout: float = 15) -> dict[str, Any]:
    def closed() -> dict[str, Any] | None:
        run = _run(api, workflow_id, run_id)
        return run if run["status"] != "Running" else None

    return dict(wait_until(closed, timeout=timeout))


BOOM = {"message": "boom", "application_failure_info": {"type": "Transient"}}


def test_failed_run_is_retried_after_backoff_until_attempts_run_out(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    policy = {"initial_interval": 1, "maximum_attempts": 2}
    first_run = api.start(wid, worker.queue, input=["x"], retry_policy=policy)["run_id"]

    _fail_current_task(worker, BOOM)
    failed_at = time.monotonic()
    closed = _run_events(api, wid, first_run)[-1]
    assert closed["event_type"] == "WorkflowExecutionFailed"
    assert closed["attributes"]["retry_state"] == "RETRY_STATE_IN_PROGRESS"
    second_run = closed["attributes"]["new_execution_run_id"]
    assert second_run and second_run != first_run
    assert _run(api, wid, first_run)["new_run_id"] == second_run

    task = worker.poll_workflow_task()
    assert time.monotonic() - failed_at >= 0.9  # the backoff: initial_interval
    assert task["workflow_execution"]["run_id"] == second_run
    started = task["history"]["events"][0]["attributes"]
    assert started["attempt"] == 2
    assert started["initiator"] == "RETRY"
    assert started["first_workflow_task_backoff"] == 1
    assert started["continued_execution_run_id"] == first_run
    assert started["first_execution_run_id"] == first_run
    assert started["continued_failure"]["message"] == "boom"
    assert started["input"] == ["x"]
    assert _run(api, wid, second_run)["previous_run_id"] == first_run

    worker.complete_workflow_task(task, command("FailWorkflowExecution", failure=BOOM))
    last = _run_events(api, wid, second_run)[-1]
    assert last["attributes"]["retry_state"] == "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED"
    assert last["attributes"]["new_execution_run_id"] is None
    assert api.describe(wid)["run_id"] == second_run
    assert api.describe(wid)["status"] == "Failed"


def test_without_a_retry_policy_a_failed_workflow_is_not_retried(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    run_id = api.start(wid, worker.queue)["run_id"]
    _fail_current_task(worker, BOOM)

    closed = _run_events(api, wid, run_id)[-1]
    assert closed["attributes"]["retry_state"] == "RETRY_STATE_RETRY_POLICY_NOT_SET"
    assert closed["attributes"]["new_execution_run_id"] is None
    assert api.describe(wid)["new_run_id"] is None


def test_a_non_retryable_failure_type_ends_the_chain(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    policy = {"initial_interval": 1, "non_retryable_error_types": ["Fatal"]}
    run_id = api.start(wid, worker.queue, retry_policy=policy)["run_id"]
    _fail_current_task(worker, {"message": "no", "application_failure_info": {"type": "Fatal"}})

    closed = _run_events(api, wid, run_id)[-1]
    assert closed["attributes"]["retry_state"] == "RETRY_STATE_NON_RETRYABLE_FAILURE"
    assert api.describe(wid)["run_id"] == run_id


def test_terminate_is_never_retried(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    run_id = api.start(wid, worker.queue, retry_policy={"initial_interval": 1})["run_id"]
    assert api.post(f"/workflows/{wid}/terminate", {"reason": "stop"}).status_code == 200
    assert _run(api, wid, run_id)["status"] == "Terminated"
    assert api.describe(wid)["run_id"] == run_id
    assert api.describe(wid)["new_run_id"] is None


def test_run_timeouts_are_retried_but_never_past_the_execution_timeout(
    api: Api, worker: ScriptedWorker
) -> None:
    wid = _wid()
    policy = {"initial_interval": 0.5, "backoff_coefficient": 1}
    first_run = api.start(wid, worker.queue, run_timeout=1, execution_timeout=3, retry_policy=policy)[
        "run_id"
    ]

    chain = [_closed_run(api, wid, first_run)]
    while chain[-1]["new_run_id"]:
        assert len(chain) < 5, "the chain must end at the execution timeout"
        chain.append(_closed_run(api, wid, chain[-1]["new_run_id"]))

    assert len(chain) >= 2
    assert all(run["status"] == "TimedOut" for run in chain)
    closes = [_run_events(api, wid, run["run_id"])[-1]["attributes"] for run in chain]
    assert [c["retry_state"] for c in closes[:-1]] == ["RETRY_STATE_IN_PROGRESS"] * (len(chain) - 1)
    assert closes[-1]["retry_state"] == "RETRY_STATE_TIMEOUT"
    expiration = datetime.fromisoformat(chain[0]["start_time"]).timestamp() + 3
    last_close = datetime.fromisoformat(chain[-1]["close_time"]).timestamp()
    assert last_close <= expiration + 1.5  # timer latency only; no run outlives the execution
    second_start = _run_events(api, wid, chain[1]["run_id"])[0]["attributes"]
    assert second_start["attempt"] == 2 and second_start["initiator"] == "RETRY"
    assert second_start["workflow_run_timeout"] <= 1
