"""A poll may take several tasks: each started in its own transaction, each token good once.

Through the frontend's ASGI application on the real PostgreSQL (the poll's own thread
pool and connections, hence transactional test databases).
"""

from __future__ import annotations

from typing import Any

import pytest

from history import kernel
from history.models import HistoryEvent, Task, WorkflowExecution
from namespaces.models import Namespace
from tests.asgi_client import asgi_post
from tests.factories import ExecutionFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "bursts"


def _poll(namespace: Namespace, authorization: str, kind: str = "workflow", **body: Any) -> Any:
    url = f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}/{kind}-tasks/poll"
    return asgi_post(url, {"identity": "w1", "timeout": 0.2, **body}, authorization=authorization)


def test_a_poll_takes_up_to_max_tasks_and_leaves_the_rest_queued(
    namespace: Namespace, authorization: str
) -> None:
    runs = [ExecutionFactory(namespace=namespace, task_queue=QUEUE) for _ in range(5)]

    r = _poll(namespace, authorization, max_tasks=3)

    assert r.status_code == 200, r.content
    tasks = r.json()["tasks"]
    assert len(tasks) == 3 and len({t["task_token"] for t in tasks}) == 3
    started = {t["workflow_execution"]["run_id"] for t in tasks}
    assert started < {str(run.run_id) for run in runs}
    for task in tasks:
        assert task["history"]["events"][-1]["event_type"] == "WorkflowTaskStarted"
    assert Task.objects.filter(namespace=namespace, task_queue=QUEUE).count() == 2
    assert len(_poll(namespace, authorization, max_tasks=3).json()["tasks"]) == 2
    assert _poll(namespace, authorization, max_tasks=3).status_code == 204


def test_each_task_of_a_batch_completes_once(namespace: Namespace, authorization: str) -> None:
    for _ in range(2):
        ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    tasks = _poll(namespace, authorization, max_tasks=2).json()["tasks"]
    url = f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}/workflow-tasks/complete"
    close = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 1}}

    for task in tasks:
        body = {"task_token": task["task_token"], "commands": [close]}
        assert asgi_post(url, body, authorization=authorization).status_code == 200
        again = asgi_post(url, body, authorization=authorization)
        assert (again.status_code, again.json()["code"]) == (404, "stale_task_token")
    closed = WorkflowExecution.objects.filter(namespace=namespace, status="Completed")
    assert closed.count() == 2
    assert HistoryEvent.objects.filter(run__in=closed, event_type="WorkflowExecutionCompleted").count() == 2


def test_activity_polls_take_batches_too(namespace: Namespace, authorization: str) -> None:
    run = ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    task = _poll(namespace, authorization).json()
    schedule = [
        {
            "command_type": "ScheduleActivityTask",
            "attributes": {"activity_id": f"a{i}", "activity_type": "Charge", "start_to_close_timeout": 30},
        }
        for i in range(4)
    ]
    kernel.respond_workflow_task_completed(
        scope=kernel.TaskScope(namespace.id, QUEUE), task_token=task["task_token"], commands=schedule
    )

    r = _poll(namespace, authorization, kind="activity", max_tasks=4)

    assert sorted(t["activity_id"] for t in r.json()["tasks"]) == ["a0", "a1", "a2", "a3"]
    assert all(t["workflow_execution"]["run_id"] == str(run.run_id) for t in r.json()["tasks"])


def test_a_poll_without_max_tasks_answers_one_task_as_before(
    namespace: Namespace, authorization: str
) -> None:
    ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    ExecutionFactory(namespace=namespace, task_queue=QUEUE)

    r = _poll(namespace, authorization)

    assert r.status_code == 200 and "task_token" in r.json() and "tasks" not in r.json()
    assert Task.objects.filter(namespace=namespace, task_queue=QUEUE).count() == 1


@pytest.mark.parametrize("bad", [0, 33, -1, "2", 2.5, True, None])
def test_a_bad_max_tasks_is_refused_and_takes_nothing(
    namespace: Namespace, authorization: str, bad: Any
) -> None:
    ExecutionFactory(namespace=namespace, task_queue=QUEUE)

    r = _poll(namespace, authorization, max_tasks=bad)

    assert r.status_code == 400
    assert r.json() == {"code": "invalid_argument", "message": "max_tasks must be an integer from 1 to 32"}
    assert Task.objects.filter(namespace=namespace, task_queue=QUEUE).count() == 1
