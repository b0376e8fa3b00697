"""Queries meet a workflow task in flight: buffered and carried by the next task."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx

from history.models import QueryState, WorkflowQuery
from tests.conftest import Api, ScriptedWorker, command, wait_until


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


class PendingQuery:
    """A client query running in the background, as a caller blocked on the answer."""

    def __init__(self, api: Api, workflow_id: str, query_type: str = "state") -> None:
        self.response: httpx.Response | None = None
        body = {"query_type": query_type, "query_args": [1]}
        self.thread = threading.Thread(
            target=lambda: setattr(self, "response", api.post(f"/workflows/{workflow_id}/query", body))
        )
        self.thread.start()

    def result(self) -> httpx.Response:
        self.thread.join(15)
        assert self.response is not None, "the query never returned"
        return self.response


def _buffered_query_id(django_db_blocker: Any, workflow_id: str) -> str:
    """Wait until the server has buffered the query behind the workflow task; return its id."""

    def find() -> str | None:
        with django_db_blocker.unblock():
            query = WorkflowQuery.objects.filter(
                run__workflow_id=workflow_id, buffered=True, state=QueryState.PENDING
            ).first()
        return str(query.id) if query else None

    return str(wait_until(find, timeout=10))


def test_query_during_a_task_rides_on_the_next_task_and_is_answered_in_its_completion(
    api: Api, worker: ScriptedWorker, django_db_blocker: Any
) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    first = worker.poll_workflow_task()
    assert first["queries"] == {}
    pending = PendingQuery(api, wid)
    query_id = _buffered_query_id(django_db_blocker, wid)
    assert api.post(f"/workflows/{wid}/signal", {"signal_name": "go"}).status_code == 200
    assert worker.complete_workflow_task(first).status_code == 200

    second = worker.poll_workflow_task()
    assert "query" not in second or second["query"] is None  # a real workflow task, not a query task
    assert second["queries"] == {query_id: {"query_type": "state", "query_args": [1]}}
    r = worker.complete_workflow_task(second, query_results={query_id: {"answer": {"n": 2}}})
    assert r.status_code == 200, r.text

    answer = pending.result()
    assert answer.status_code == 200 and answer.json() == {"answer": {"n": 2}}
    assert not [t for t in api.event_types(wid) if "Query" in t]


def test_a_query_answered_with_an_error_in_the_completion_fails_clearly(
    api: Api, worker: ScriptedWorker, django_db_blocker: Any
) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    pending = PendingQuery(api, wid)  # the first task is scheduled: the query waits for it
    query_id = _buffered_query_id(django_db_blocker, wid)
    task = worker.poll_workflow_task()
    assert list(task["queries"]) == [query_id]
    worker.complete_workflow_task(task, query_results={query_id: {"error_message": "unknown query"}})

    answer = pending.result()
    assert answer.status_code == 422 and answer.json()["code"] == "query_failed"
    assert "unknown query" in answer.text


def test_a_buffered_query_left_unanswered_with_no_next_task_becomes_a_query_task(
    api: Api, worker: ScriptedWorker, django_db_blocker: Any
) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    task = worker.poll_workflow_task()
    pending = PendingQuery(api, wid)
    _buffered_query_id(django_db_blocker, wid)
    worker.complete_workflow_task(task)  # no answer and nothing left to schedule

    query_task = worker.poll_workflow_task()
    assert query_task["query"]["query_type"] == "state"
    r = api.post(
        f"/task-queues/{worker.queue}/query-tasks/respond",
        {"task_token": query_task["task_token"], "answer": "idle"},
    )
    assert r.status_code == 200, r.text
    assert pending.result().json() == {"answer": "idle"}


def test_a_query_buffered_when_the_run_is_terminated_is_sent_as_a_query_task(
    api: Api, worker: ScriptedWorker, django_db_blocker: Any
) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    pending = PendingQuery(api, wid)
    _buffered_query_id(django_db_blocker, wid)
    assert api.post(f"/workflows/{wid}/terminate", {"reason": "stop"}).status_code == 200

    query_task = worker.poll_workflow_task()
    assert query_task["query"]["query_type"] == "state"
    api.post(
        f"/task-queues/{worker.queue}/query-tasks/respond",
        {"task_token": query_task["task_token"], "answer": "replayed"},
    )
    assert pending.result().json() == {"answer": "replayed"}


def test_a_closed_run_is_answered_by_a_query_task(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    worker.complete_workflow_task(worker.poll_workflow_task(), command("CompleteWorkflowExecution", result=1))
    pending = PendingQuery(api, wid)

    query_task = worker.poll_workflow_task()
    assert query_task["query"]["query_type"] == "state"
    assert query_task["history"]["events"][-1]["event_type"] == "WorkflowExecutionCompleted"
    api.post(
        f"/task-queues/{worker.queue}/query-tasks/respond",
        {"task_token": query_task["task_token"], "answer": "done"},
    )
    assert pending.result().json() == {"answer": "done"}


def test_malformed_query_results_are_refused(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    task = worker.poll_workflow_task()
    r = worker.complete_workflow_task(task, query_results={"x": "not an object"})
    assert r.status_code == 400, r.text
    assert worker.complete_workflow_task(task, query_results={"not-a-uuid": {"answer": 1}}).status_code == 200


def test_only_one_query_waits_per_run_and_the_next_is_refused_as_busy(
    api: Api, worker: ScriptedWorker, django_db_blocker: Any
) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    task = worker.poll_workflow_task()
    pending = PendingQuery(api, wid)
    query_id = _buffered_query_id(django_db_blocker, wid)

    r = api.post(f"/workflows/{wid}/query", {"query_type": "second"})
    assert r.status_code == 429 and r.json()["code"] == "busy_workflow"
    worker.complete_workflow_task(task, force_create_new_workflow_task=True)
    next_task = worker.poll_workflow_task()
    worker.complete_workflow_task(next_task, query_results={query_id: {"answer": "first"}})
    assert pending.result().json() == {"answer": "first"}


def test_queries_fail_fast_while_the_workflow_task_keeps_failing(api: Api, worker: ScriptedWorker) -> None:
    wid = _wid()
    api.start(wid, worker.queue)
    for _ in range(2):
        task = worker.poll_workflow_task()
        r = api.post(
            f"/task-queues/{worker.queue}/workflow-tasks/fail",
            {
                "task_token": task["task_token"],
                "cause": "WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE",
            },
        )
        assert r.status_code == 200, r.text
    r = api.post(f"/workflows/{wid}/query", {"query_type": "state"})
    assert r.status_code == 429 and "keeps failing" in r.json()["message"]


def test_a_run_closed_before_any_task_completed_refuses_queries(api: Api, queue: str) -> None:
    wid = _wid()
    api.start(wid, queue)
    assert api.post(f"/workflows/{wid}/terminate", {"reason": "stop"}).status_code == 200
    r = api.post(f"/workflows/{wid}/query", {"query_type": "state"})
    assert r.status_code == 409 and "before any workflow task completed" in r.json()["message"]
