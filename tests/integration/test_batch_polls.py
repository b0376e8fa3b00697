"""A poll may take several tasks, claimed together, each started once, each token good once.

Through the frontend's ASGI application on the real PostgreSQL (the poll's own thread
pool and connections, hence transactional test databases).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from history import kernel
from history.models import HistoryEvent, Task, TaskKind, WorkflowExecution
from matching.dispatch import poll_batch, record_poller
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
    assert r.json()["code"] == "invalid_argument"
    assert list(r.json()["details"]["fields"]) == ["max_tasks"]
    assert Task.objects.filter(namespace=namespace, task_queue=QUEUE).count() == 1


def _claim_statements(queries: CaptureQueriesContext) -> tuple[int, int]:
    """How many claim (DELETE of task rows) and run-lock statements were sent."""
    sql = [q["sql"] for q in queries.captured_queries]
    claims = sum(s.lstrip().startswith("DELETE FROM history_task ") for s in sql)
    locks = sum("FOR UPDATE OF e" in s for s in sql)
    return claims, locks


def test_a_burst_is_claimed_and_its_runs_locked_in_one_statement_each(namespace: Namespace) -> None:
    runs = [ExecutionFactory(namespace=namespace, task_queue=QUEUE) for _ in range(4)]
    record_poller(namespace, QUEUE, TaskKind.WORKFLOW, "w1")  # the poller's row, written apart

    with CaptureQueriesContext(connection) as queries:
        tasks = poll_batch(namespace, QUEUE, TaskKind.WORKFLOW, "w1", max_tasks=4)

    assert sorted(t["workflow_execution"]["run_id"] for t in tasks) == sorted(str(r.run_id) for r in runs)
    assert _claim_statements(queries) == (1, 1)
    assert sum(q["sql"] == "COMMIT" for q in queries.captured_queries) == 1
    for run in runs:
        run.refresh_from_db()
        assert run.wft_started_event_id != 0


def test_a_stale_row_in_a_burst_is_dropped_and_the_others_start(namespace: Namespace) -> None:
    runs = [ExecutionFactory(namespace=namespace, task_queue=QUEUE) for _ in range(3)]
    closed = runs[1]
    kernel.terminate_workflow_execution(namespace, workflow_id=closed.workflow_id, run_id=None, reason="gone")
    stale = Task.objects.create(
        namespace=namespace,
        task_queue=QUEUE,
        kind=TaskKind.WORKFLOW,
        run_id=closed.run_id,
        shard_id=closed.shard_id,
        scheduled_event_id=2,
        attempt=1,
        visible_at=timezone.now(),
        created_at=timezone.now(),
    )

    tasks = poll_batch(namespace, QUEUE, TaskKind.WORKFLOW, "w1", max_tasks=3)

    assert sorted(t["workflow_execution"]["run_id"] for t in tasks) == sorted(
        str(r.run_id) for r in (runs[0], runs[2])
    )
    assert not Task.objects.filter(pk=stale.pk).exists()


def test_two_rows_of_one_run_in_a_burst_start_its_task_once(namespace: Namespace) -> None:
    run = ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    [row] = Task.objects.filter(run_id=run.run_id)
    Task.objects.create(
        namespace=namespace,
        task_queue=QUEUE,
        kind=TaskKind.WORKFLOW,
        run_id=run.run_id,
        shard_id=row.shard_id,
        scheduled_event_id=row.scheduled_event_id,
        attempt=row.attempt,
        visible_at=timezone.now(),
        created_at=timezone.now(),
    )

    tasks = poll_batch(namespace, QUEUE, TaskKind.WORKFLOW, "w1", max_tasks=5)

    assert [t["workflow_execution"]["run_id"] for t in tasks] == [str(run.run_id)]
    events = HistoryEvent.objects.filter(run_id=run.run_id, event_type="WorkflowTaskStarted")
    assert events.count() == 1
    assert not Task.objects.filter(run_id=run.run_id).exists()


def test_a_burst_starts_its_tasks_in_one_write_and_reads_their_histories_in_one_statement(
    namespace: Namespace,
) -> None:
    """However many tasks a burst takes, it is a claim, a lock, a write and a read."""
    assert (
        poll_batch(namespace, QUEUE, TaskKind.WORKFLOW, "w1", max_tasks=6) == []
    )  # limits read, poller seen
    runs = [ExecutionFactory(namespace=namespace, task_queue=QUEUE) for _ in range(6)]

    with CaptureQueriesContext(connection) as queries:
        tasks = poll_batch(namespace, QUEUE, TaskKind.WORKFLOW, "w1", max_tasks=6)

    statements = [q["sql"] for q in queries.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]
    assert len(tasks) == 6 and len(statements) == 4, statements
    for task in tasks:
        run_id = task["workflow_execution"]["run_id"]
        stored = list(
            HistoryEvent.objects.filter(run_id=run_id)
            .order_by("event_id")
            .values_list("event_id", "event_type")
        )
        assert [(e["event_id"], e["event_type"]) for e in task["history"]["events"]] == stored
        assert stored[-1][1] == "WorkflowTaskStarted"
    assert {t["workflow_execution"]["run_id"] for t in tasks} == {str(r.run_id) for r in runs}


def test_a_burst_with_a_query_task_answers_it_beside_the_workflow_tasks(namespace: Namespace) -> None:
    first, second = (ExecutionFactory(namespace=namespace, task_queue=QUEUE) for _ in range(2))
    started = poll_batch(namespace, QUEUE, TaskKind.WORKFLOW, "w1", max_tasks=1)
    busy = first if started[0]["workflow_execution"]["run_id"] == str(first.run_id) else second
    idle = second if busy is first else first
    kernel.respond_workflow_task_completed(
        scope=kernel.TaskScope(namespace.id, QUEUE), task_token=started[0]["task_token"], commands=[]
    )
    kernel.create_query(namespace, workflow_id=busy.workflow_id, run_id=None, query_type="q", query_args=[])

    tasks = poll_batch(namespace, QUEUE, TaskKind.WORKFLOW, "w1", max_tasks=5)

    queries = [t for t in tasks if t.get("query")]
    workflow_tasks = [t for t in tasks if not t.get("query")]
    assert [t["workflow_execution"]["run_id"] for t in queries] == [str(busy.run_id)]
    assert [t["workflow_execution"]["run_id"] for t in workflow_tasks] == [str(idle.run_id)]
    assert workflow_tasks[0]["history"]["events"][0]["event_id"] == 1
