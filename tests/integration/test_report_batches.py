"""Several token calls in one request: each answered and written as it would be alone.

Through the frontend's ASGI application on the real PostgreSQL (the lane's own threads
and connections, hence transactional test databases).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from history.models import HistoryEvent, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.asgi_client import asgi_post, asgi_request
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "reports"
CLOSE = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 1}}


def _batch(namespace: Namespace, authorization: str, *reports: dict[str, Any]) -> Any:
    url = f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}/responses"
    return asgi_post(url, {"responses": list(reports)}, authorization=authorization)


def _task(namespace: Namespace) -> dict[str, Any]:
    run = ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    task = poll_once(run.namespace, QUEUE, "workflow", "w1")
    assert task is not None
    return task


def test_each_call_of_a_batch_is_answered_as_it_would_be_alone(
    namespace: Namespace, authorization: str
) -> None:
    first, second = _task(namespace), _task(namespace)
    complete = {
        "kind": "workflow-tasks/complete",
        "body": {"task_token": first["task_token"], "commands": [CLOSE]},
    }

    r = _batch(
        namespace,
        authorization,
        complete,
        complete,  # the same task again: stale, as a second call alone would be
        {"kind": "workflow-tasks/complete", "body": {"task_token": second["task_token"], "commands": "no"}},
        {"kind": "workflow-tasks/nope", "body": {}},
        {"kind": "workflow-tasks/fail", "body": {"task_token": second["task_token"], "cause": "BAD"}},
    )

    assert r.status_code == 200, r.content
    answers = r.json()["responses"]
    assert [a["status"] for a in answers] == [200, 404, 400, 400, 200]
    assert answers[0]["body"] == {
        "workflow_task": None,
        "activity_tasks": [],
        "closed": answers[0]["body"]["closed"],
    }
    assert answers[1]["body"]["code"] == "stale_task_token"
    assert answers[2]["body"]["details"] == {
        "fields": {"commands": ['Expected a list of items but got type "str".']}
    }
    assert "unknown kind 'workflow-tasks/nope'" in answers[3]["body"]["message"]
    closed = WorkflowExecution.objects.get(run_id=first["workflow_execution"]["run_id"])
    assert closed.status == "Completed"
    failed = HistoryEvent.objects.filter(
        run_id=second["workflow_execution"]["run_id"], event_type="WorkflowTaskFailed"
    )
    assert failed.count() == 1


def test_a_token_of_another_namespace_in_a_batch_is_refused_as_unknown_and_moves_nothing(
    namespace: Namespace, authorization: str
) -> None:
    other = NamespaceFactory()
    foreign = _task(other)
    events = HistoryEvent.objects.filter(run_id=foreign["workflow_execution"]["run_id"]).count()
    complete = {"task_token": foreign["task_token"], "commands": [CLOSE]}

    r = _batch(namespace, authorization, {"kind": "workflow-tasks/complete", "body": complete})

    assert r.json()["responses"] == [
        {"status": 404, "body": {"code": "not_found", "message": "task not found"}}
    ]
    assert HistoryEvent.objects.filter(run_id=foreign["workflow_execution"]["run_id"]).count() == events


@pytest.mark.parametrize(
    ("body", "status"),
    [({"responses": []}, 400), ({"responses": [{"kind": "x", "body": {}}] * 65}, 400), ({}, 400), ([], 400)],
)
def test_a_malformed_batch_is_refused_whole(
    namespace: Namespace, authorization: str, body: Any, status: int
) -> None:
    url = f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}/responses"
    assert asgi_post(url, body, authorization=authorization).status_code == status


def test_a_batch_needs_a_worker_key_of_the_namespace(namespace: Namespace) -> None:
    client_only = ApiKeyFactory(namespace=namespace, roles=["client"]).authorization
    task = _task(namespace)
    report = {
        "kind": "workflow-tasks/complete",
        "body": {"task_token": task["task_token"], "commands": [CLOSE]},
    }

    assert _batch(namespace, "Bearer nope", report).status_code == 401
    refused = _batch(namespace, client_only, report).json()["responses"][0]
    assert (refused["status"], refused["body"]["code"]) == (403, "permission_denied")
    assert WorkflowExecution.objects.get(run_id=task["workflow_execution"]["run_id"]).status == "Running"


def test_a_large_batch_is_answered_call_by_call(namespace: Namespace, authorization: str) -> None:
    """Forty calls hold far more brackets than one body may nest: each call is vetted alone."""
    tasks = [_task(namespace) for _ in range(40)]
    reports = [
        {"kind": "workflow-tasks/complete", "body": {"task_token": t["task_token"], "commands": [CLOSE]}}
        for t in tasks
    ]

    r = _batch(namespace, authorization, *reports)

    assert r.status_code == 200, r.content
    assert [a["status"] for a in r.json()["responses"]] == [200] * 40
    assert WorkflowExecution.objects.filter(namespace=namespace, status="Completed").count() == 40


def test_a_bad_call_is_refused_alone(namespace: Namespace, authorization: str) -> None:
    good, other = _task(namespace), _task(namespace)
    nul = {"task_token": other["task_token"], "commands": [CLOSE], "identity": "a\\u0000b"}
    deep: Any = {"x": 1}
    for _ in range(70):
        deep = {"x": deep}
    too_deep = {"task_token": other["task_token"], "commands": [CLOSE], "query_results": deep}
    complete = {"task_token": good["task_token"], "commands": [CLOSE]}
    url = f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}/responses"
    raw = (
        '{"responses": ['
        f'{{"kind": "workflow-tasks/complete", "body": {json.dumps(nul).replace(chr(92) * 2, chr(92))}}},'
        f'{{"kind": "workflow-tasks/complete", "body": {json.dumps(too_deep)}}},'
        f'{{"kind": "workflow-tasks/complete", "body": {json.dumps(complete)}}}'
        "]}"
    )

    r = asgi_request("POST", url, raw, authorization=authorization)

    answers = r.json()["responses"]
    assert [(a["status"], a["body"].get("code")) for a in answers] == [
        (400, "malformed_request"),
        (400, "malformed_request"),
        (200, None),
    ]
    assert WorkflowExecution.objects.get(run_id=other["workflow_execution"]["run_id"]).status == "Running"
    assert WorkflowExecution.objects.get(run_id=good["workflow_execution"]["run_id"]).status == "Completed"
