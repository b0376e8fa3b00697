"""A task token works only in the namespace and task queue that issued it.

Each token-bearing endpoint is called with namespace A's worker key, a genuine token of
namespace B and A's URL: the answer is the one an unknown task gets, nothing of B's run
changes (row and event counts, the run's own columns), and B's own call then works.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.core import signing

from history import kernel
from history.kernel import tokens
from history.models import (
    HistoryEvent,
    PendingActivity,
    Task,
    TimerTask,
    WorkflowExecution,
    WorkflowQuery,
)
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.asgi_client import asgi_post
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory, scope_of

# The token calls are served by the lean lane on the API's thread pool (its own database
# connections): the rows must be committed for it to see them.
pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "orders"


@dataclass
class Tenant:
    namespace: Namespace
    authorization: str

    def post(self, path: str, body: dict[str, Any], *, namespace: str = "") -> Any:
        url = f"/api/v1/namespaces/{namespace or self.namespace.name}/task-queues/{path}"
        return asgi_post(url, body, authorization=self.authorization)


def _tenant() -> Tenant:
    namespace = NamespaceFactory()
    return Tenant(namespace, ApiKeyFactory(namespace=namespace).authorization)


@pytest.fixture
def a() -> Tenant:
    return _tenant()


@pytest.fixture
def b() -> Tenant:
    return _tenant()


def snapshot(run: WorkflowExecution) -> dict[str, Any]:
    """Everything a token call could move for ``run``: its rows, counted and read."""
    fresh = WorkflowExecution.objects.get(run_id=run.run_id)
    return {
        "events": HistoryEvent.objects.filter(run=run).count(),
        "tasks": Task.objects.filter(run_id=run.run_id).count(),
        "timers": TimerTask.objects.filter(run_id=run.run_id).count(),
        "activities": list(
            PendingActivity.objects.filter(run=run).values_list(
                "attempt", "state", "heartbeat_details", "last_heartbeat_time"
            )
        ),
        "queries": list(WorkflowQuery.objects.filter(run=run).values_list("state", "answer")),
        "run": (fresh.status, fresh.next_event_id, fresh.wft_scheduled_event_id, fresh.wft_attempt),
    }


def command(command_type: str, **attributes: Any) -> dict[str, Any]:
    return {"command_type": command_type, "attributes": attributes}


def _schedule_activity(run: WorkflowExecution) -> dict[str, Any]:
    """Complete the run's first workflow task with one activity, then start that activity."""
    task = poll_once(run.namespace, QUEUE, "workflow", "b-worker")
    assert task is not None
    schedule = command(
        "ScheduleActivityTask", activity_id="a1", activity_type="Charge", start_to_close_timeout=60
    )
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[schedule]
    )
    activity = poll_once(run.namespace, QUEUE, "activity", "b-worker")
    assert activity is not None
    return activity


def _with_cancel_request(run: WorkflowExecution, activity: dict[str, Any]) -> None:
    """Ask for the started activity's cancellation from a new workflow task."""
    kernel.signal_workflow_execution(
        run.namespace, workflow_id=run.workflow_id, signal_name="stop", run_id=None, input=[]
    )
    task = poll_once(run.namespace, QUEUE, "workflow", "b-worker")
    assert task is not None
    cancel = command("RequestCancelActivityTask", scheduled_event_id=activity["scheduled_event_id"])
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[cancel]
    )


@dataclass
class Case:
    """A token endpoint: how to get B's token for it and a body that would move B's run."""

    name: str
    path: str
    prepare: Callable[[WorkflowExecution], str]
    body: Callable[[str], dict[str, Any]]


def _wft_token(run: WorkflowExecution) -> str:
    task = poll_once(run.namespace, QUEUE, "workflow", "b-worker")
    assert task is not None
    return str(task["task_token"])


def _activity_token(run: WorkflowExecution) -> str:
    return str(_schedule_activity(run)["task_token"])


def _canceling_activity_token(run: WorkflowExecution) -> str:
    activity = _schedule_activity(run)
    _with_cancel_request(run, activity)
    return str(activity["task_token"])


def _query_token(run: WorkflowExecution) -> str:
    first = poll_once(run.namespace, QUEUE, "workflow", "b-worker")
    assert first is not None
    kernel.respond_workflow_task_completed(scope=scope_of(first), task_token=first["task_token"], commands=[])
    kernel.create_query(
        run.namespace, workflow_id=run.workflow_id, run_id=None, query_type="state", query_args=[]
    )
    task = poll_once(run.namespace, QUEUE, "workflow", "b-worker")
    assert task is not None and task["query"] is not None
    return str(task["task_token"])


CASES = [
    Case(
        "workflow task complete",
        "workflow-tasks/complete",
        _wft_token,
        lambda t: {"task_token": t, "commands": [command("CompleteWorkflowExecution", result="stolen")]},
    ),
    Case(
        "workflow task fail",
        "workflow-tasks/fail",
        _wft_token,
        lambda t: {
            "task_token": t,
            "cause": "WORKFLOW_TASK_FAILED_CAUSE_UNSPECIFIED",
            "failure": {"message": "x"},
        },
    ),
    Case(
        "activity complete",
        "activity-tasks/complete",
        _activity_token,
        lambda t: {"task_token": t, "result": 1},
    ),
    Case(
        "activity fail",
        "activity-tasks/fail",
        _activity_token,
        lambda t: {"task_token": t, "failure": {"message": "stolen", "non_retryable": True}},
    ),
    Case(
        "activity canceled",
        "activity-tasks/canceled",
        _canceling_activity_token,
        lambda t: {"task_token": t, "details": "stolen"},
    ),
    Case(
        "activity heartbeat",
        "activity-tasks/heartbeat",
        _activity_token,
        lambda t: {"task_token": t, "details": 7},
    ),
    Case(
        "query answer", "query-tasks/respond", _query_token, lambda t: {"task_token": t, "answer": "stolen"}
    ),
]


def _unknown_answer(tenant: Tenant, case: Case, kind: str) -> Any:
    """What A gets for a well-signed token of its own namespace naming no run at all."""
    fields = (
        {"q": str(uuid.uuid4())} if kind == "query" else {"r": str(uuid.uuid4()), "s": 2, "st": 3, "a": 1}
    )
    unknown = tokens.encode(kind, tenant.namespace.id, **fields)
    return tenant.post(f"{QUEUE}/{case.path}", case.body(unknown))


def _kind(case: Case) -> str:
    return "wft" if case.path.startswith("workflow") else "query" if case.path.startswith("query") else "act"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("queue", [QUEUE, "anything-else"])
def test_a_token_of_another_namespace_is_refused_as_unknown(
    a: Tenant, b: Tenant, case: Case, queue: str
) -> None:
    run = ExecutionFactory(namespace=b.namespace, task_queue=QUEUE)
    token = case.prepare(run)
    before = snapshot(run)

    r = a.post(f"{queue}/{case.path}", case.body(token))

    assert r.status_code == 404, r.content
    assert (
        r.json()
        == _unknown_answer(a, case, _kind(case)).json()
        == {"code": "not_found", "message": "task not found"}
    )
    assert b.namespace.name not in r.content.decode() and str(run.run_id) not in r.content.decode()
    assert snapshot(run) == before
    # The token still works where it came from.
    assert b.post(f"{QUEUE}/{case.path}", case.body(token)).status_code == 200
    assert snapshot(run) != before


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_token_answered_on_another_queue_of_its_namespace_is_refused_as_unknown(
    b: Tenant, case: Case
) -> None:
    run = ExecutionFactory(namespace=b.namespace, task_queue=QUEUE)
    token = case.prepare(run)
    before = snapshot(run)

    r = b.post(f"payments/{case.path}", case.body(token))

    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    assert snapshot(run) == before
    assert b.post(f"{QUEUE}/{case.path}", case.body(token)).status_code == 200


def test_a_workflow_task_may_be_answered_on_the_runs_sticky_queue(b: Tenant) -> None:
    run = ExecutionFactory(namespace=b.namespace, task_queue=QUEUE)
    first = poll_once(run.namespace, QUEUE, "workflow", "b-worker")
    assert first is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(first),
        task_token=first["task_token"],
        commands=[],
        sticky_task_queue="orders-sticky-1",
    )
    kernel.signal_workflow_execution(
        run.namespace, workflow_id=run.workflow_id, signal_name="go", run_id=None, input=[]
    )
    task = poll_once(run.namespace, "orders-sticky-1", "workflow", "b-worker")
    assert task is not None

    r = b.post("orders-sticky-1/workflow-tasks/complete", {"task_token": task["task_token"], "commands": []})

    assert r.status_code == 200, r.content


def test_a_token_of_the_retired_shape_gets_a_clear_400(b: Tenant) -> None:
    run = ExecutionFactory(namespace=b.namespace, task_queue=QUEUE)
    _wft_token(run)
    before = snapshot(run)
    old = signing.dumps(
        {"k": "wft", "r": str(run.run_id), "s": 2, "st": 3, "a": 1}, salt="chronicle.task-token.v1"
    )

    r = b.post(f"{QUEUE}/workflow-tasks/complete", {"task_token": old, "commands": []})

    assert r.status_code == 400
    assert r.json() == {
        "code": "invalid_argument",
        "message": "task token was issued by an older server version; poll for the task again",
    }
    assert snapshot(run) == before


def test_a_token_altered_to_name_another_namespace_is_not_valid(a: Tenant, b: Tenant) -> None:
    run = ExecutionFactory(namespace=b.namespace, task_queue=QUEUE)
    token = _wft_token(run)
    payload = signing.loads(token, salt="chronicle.task-token.v2")
    forged = signing.dumps({**payload, "n": str(a.namespace.id)}, salt="chronicle.task-token.v2-forged")

    r = a.post(f"{QUEUE}/workflow-tasks/complete", {"task_token": forged, "commands": []})

    assert (r.status_code, r.json()["code"]) == (400, "invalid_argument")
