"""A worker's sticky poll fires the due timers of the runs it holds and takes the woken tasks.

Through the frontend's ASGI application on the real PostgreSQL: the poll names runs sticky
to its queue (``due_timers``); one transaction fires each timer due by the database's
clock and starts the woken task for the poll. Nothing else is fired: a timer not yet due,
a run of another namespace or sticky to another worker, a run's timer fired before.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from history.models import HistoryEvent, Task, TimerKind, TimerTask, WorkflowExecution
from namespaces.models import Namespace
from tests.asgi_client import asgi_post
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "sleepers"
STICKY = "sleepers-sticky-w1"


def _url(namespace: Namespace, queue: str, what: str) -> str:
    return f"/api/v1/namespaces/{namespace.name}/task-queues/{queue}/workflow-tasks/{what}"


def _poll(namespace: Namespace, authorization: str, queue: str, **body: Any) -> Any:
    payload = {"identity": "w1", "timeout": 0.2, **body}
    return asgi_post(_url(namespace, queue, "poll"), payload, authorization=authorization)


def _sleeping_run(namespace: Namespace, authorization: str, seconds: float, sticky: str = STICKY) -> str:
    """A run whose first task started a timer of ``seconds``, sticky to ``sticky``; its id."""
    run = ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    task = _poll(namespace, authorization, QUEUE).json()
    timer = {"command_type": "StartTimer", "attributes": {"timer_id": "t1", "start_to_fire_timeout": seconds}}
    body = {"task_token": task["task_token"], "commands": [timer], "sticky_task_queue": sticky}
    done = asgi_post(_url(namespace, QUEUE, "complete"), body, authorization=authorization)
    assert done.status_code == 200, done.content
    return str(run.run_id)


def _timers(run_id: str) -> int:
    return TimerTask.objects.filter(run_id=run_id, kind=TimerKind.USER_TIMER).count()


def test_the_poll_fires_its_runs_due_timers_and_takes_the_woken_tasks(
    namespace: Namespace, authorization: str
) -> None:
    runs = [_sleeping_run(namespace, authorization, 0.001) for _ in range(3)]
    time.sleep(0.05)

    r = _poll(namespace, authorization, STICKY, due_timers=runs, max_tasks=3)

    assert r.status_code == 200, r.content
    tasks = r.json()["tasks"]
    assert sorted(t["workflow_execution"]["run_id"] for t in tasks) == sorted(runs)
    for task in tasks:
        # The events since the task that started the timer: the worker holds the rest.
        kinds = [e["event_type"] for e in task["history"]["events"]]
        assert kinds[0] == "WorkflowTaskCompleted", kinds
        assert kinds[-3:] == ["TimerFired", "WorkflowTaskScheduled", "WorkflowTaskStarted"], kinds
    assert sum(_timers(run) for run in runs) == 0, "each timer fired, its row gone"
    assert not Task.objects.filter(namespace=namespace).exists(), "no task row was queued"
    # The woken task is the run's, started once: it completes, and its token is then spent.
    close = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 1}}
    body = {"task_token": tasks[0]["task_token"], "commands": [close]}
    complete = _url(namespace, STICKY, "complete")
    assert asgi_post(complete, body, authorization=authorization).status_code == 200
    again = asgi_post(complete, body, authorization=authorization)
    assert (again.status_code, again.json()["code"]) == (404, "stale_task_token")
    # Asked again, nothing is left to fire: the poll answers at once, empty.
    began = time.monotonic()
    assert _poll(namespace, authorization, STICKY, due_timers=runs, max_tasks=3).status_code == 204
    assert time.monotonic() - began < 0.15, "a poll for due timers does not wait"
    fired = HistoryEvent.objects.filter(run_id__in=runs, event_type="TimerFired").count()
    assert fired == 3


def test_a_poll_without_max_tasks_takes_one_woken_task(namespace: Namespace, authorization: str) -> None:
    runs = [_sleeping_run(namespace, authorization, 0.001) for _ in range(2)]
    time.sleep(0.05)

    r = _poll(namespace, authorization, STICKY, due_timers=runs)

    assert r.status_code == 200 and "task_token" in r.json()
    assert sum(_timers(run) for run in runs) == 1, "the other run's timer is left to the shard owner"


def test_a_timer_not_yet_due_is_not_fired(namespace: Namespace, authorization: str) -> None:
    run = _sleeping_run(namespace, authorization, 60)

    r = _poll(namespace, authorization, STICKY, due_timers=[run], max_tasks=2)

    assert r.status_code == 204
    assert _timers(run) == 1
    assert not HistoryEvent.objects.filter(run_id=run, event_type="TimerFired").exists()


def test_only_runs_of_the_key_namespace_sticky_to_the_polling_queue_are_fired(
    namespace: Namespace, authorization: str
) -> None:
    other = NamespaceFactory()
    other_authorization = ApiKeyFactory(namespace=other).authorization
    theirs = _sleeping_run(other, other_authorization, 0.001)
    elsewhere = _sleeping_run(namespace, authorization, 0.001, sticky="sleepers-sticky-w2")
    time.sleep(0.05)

    r = _poll(namespace, authorization, STICKY, due_timers=[theirs, elsewhere], max_tasks=2)

    assert r.status_code == 204
    assert _timers(theirs) == 1 and _timers(elsewhere) == 1
    before = {run: WorkflowExecution.objects.get(run_id=run).next_event_id for run in (theirs, elsewhere)}
    assert before == {run: WorkflowExecution.objects.get(run_id=run).next_event_id for run in before}


@pytest.mark.parametrize(
    "bad", [["not-a-run"], "abc", [1], [None], ["00000000-0000-0000-0000-000000000001"] * 33]
)
def test_bad_due_timers_are_refused_and_fire_nothing(
    namespace: Namespace, authorization: str, bad: Any
) -> None:
    run = _sleeping_run(namespace, authorization, 0.001)
    time.sleep(0.05)

    r = _poll(namespace, authorization, STICKY, due_timers=bad, max_tasks=2)

    assert r.status_code == 400
    assert (r.json()["code"], list(r.json()["details"]["fields"])) == ("invalid_argument", ["due_timers"])
    assert _timers(run) == 1
