"""Temporal's ResetStickyTaskQueue, through the kernel on the real PostgreSQL.

A worker that dropped a run from its cache resets the run's sticky queue: the run is no
longer sticky, and a workflow task waiting on the sticky queue moves to the normal queue,
whose poller gets the whole history. No event is written; a closed or non-sticky run has
nothing to reset; a run of another namespace or task queue is refused as an unknown task
is, and nothing of it moves.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode
from history import kernel
from history.models import HistoryEvent, Task, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from matching.models import Poller
from namespaces.models import Namespace
from tests.factories import ExecutionFactory, NamespaceFactory, made_sticky

pytestmark = pytest.mark.django_db

QUEUE, STICKY = "orders", "orders-sticky-w1"
CLOSE = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 1}}


def sticky_run(namespace: Namespace | None = None) -> WorkflowExecution:
    """A run whose first workflow task completed with ``STICKY`` as its sticky queue, whose
    worker still polls it (so a normal poll does not take its tasks by the fallback)."""
    run = ExecutionFactory(task_queue=QUEUE, **({"namespace": namespace} if namespace else {}))
    made_sticky(run, STICKY, 30)
    Poller.objects.update_or_create(
        namespace=run.namespace,
        task_queue=STICKY,
        kind="workflow",
        identity="w1",
        defaults={"last_seen_at": timezone.now()},
    )
    return WorkflowExecution.objects.get(run_id=run.run_id)


def signal(run: WorkflowExecution) -> None:
    kernel.signal_workflow_execution(
        run.namespace, workflow_id=run.workflow_id, run_id=None, signal_name="wake", input=[]
    )


def _reset(run: WorkflowExecution) -> None:
    scope = kernel.TaskScope(run.namespace_id, QUEUE)
    kernel.reset_sticky_task_queue(scope=scope, workflow_id=run.workflow_id, run_id=str(run.run_id))


def state(run: WorkflowExecution) -> dict[str, Any]:
    """Everything a reset could move: the run's columns, events, task and timer rows."""
    fresh = WorkflowExecution.objects.get(run_id=run.run_id)
    return {
        "run": (
            fresh.status,
            fresh.sticky_task_queue,
            fresh.sticky_schedule_to_start_timeout,
            fresh.wft_task_queue,
            fresh.wft_scheduled_event_id,
            fresh.wft_started_event_id,
            fresh.wft_attempt,
            fresh.next_event_id,
        ),
        "events": list(
            HistoryEvent.objects.filter(run_id=run.run_id).order_by("event_id").values_list("event_type")
        ),
        "tasks": sorted(
            Task.objects.filter(run_id=run.run_id).values_list("task_queue", "scheduled_event_id", "attempt")
        ),
        "timers": sorted(
            TimerTask.objects.filter(run_id=run.run_id).values_list("kind", "scheduled_event_id")
        ),
    }


def test_a_reset_moves_the_waiting_sticky_task_to_the_normal_queue_with_the_whole_history() -> None:
    run = sticky_run()
    signal(run)
    before = state(run)
    assert [queue for queue, _, _ in before["tasks"]] == [STICKY]
    assert poll_once(run.namespace, QUEUE, "workflow", "w2") is None, "the task waits for its sticky worker"

    _reset(run)

    after = state(run)
    fresh = WorkflowExecution.objects.get(run_id=run.run_id)
    assert fresh.sticky_task_queue == "" and fresh.wft_task_queue == QUEUE
    assert fresh.sticky_schedule_to_start_timeout == 5.0, "the worker's sticky timeout went with its queue"
    assert after["events"] == before["events"], "no event is written"
    scheduled = fresh.wft_scheduled_event_id
    assert after["tasks"] == [(QUEUE, scheduled, 1)], "the same task, now on the normal queue"
    assert (TimerKind.STICKY_TIMEOUT.value, scheduled) not in after["timers"], "its sticky timeout is gone"
    assert poll_once(run.namespace, STICKY, "workflow", "w1") is None
    task = poll_once(run.namespace, QUEUE, "workflow", "w2")
    assert task is not None
    events = task["history"]["events"]
    assert events[0]["event_id"] == 1 and events[-1]["event_type"] == "WorkflowTaskStarted"
    assert WorkflowExecution.objects.get(run_id=run.run_id).wft_started_event_id == events[-1]["event_id"]


def test_after_a_reset_the_next_task_is_scheduled_on_the_normal_queue() -> None:
    run = sticky_run()

    _reset(run)
    signal(run)

    fresh = WorkflowExecution.objects.get(run_id=run.run_id)
    assert fresh.wft_task_queue == QUEUE
    assert list(Task.objects.filter(run_id=run.run_id).values_list("task_queue", flat=True)) == [QUEUE]
    assert not TimerTask.objects.filter(run_id=run.run_id, kind=TimerKind.STICKY_TIMEOUT).exists()


def test_a_reset_keeps_a_started_task_with_its_worker() -> None:
    run = sticky_run()
    signal(run)
    started = poll_once(run.namespace, STICKY, "workflow", "w1")
    assert started is not None

    _reset(run)

    fresh = WorkflowExecution.objects.get(run_id=run.run_id)
    assert fresh.sticky_task_queue == "" and fresh.wft_task_queue == STICKY
    assert not Task.objects.filter(run_id=run.run_id).exists(), "nothing to dispatch again"
    scope = kernel.TaskScope(run.namespace_id, QUEUE)
    kernel.respond_workflow_task_completed(scope=scope, task_token=started["task_token"], commands=[CLOSE])
    assert WorkflowExecution.objects.get(run_id=run.run_id).status == "Completed"


def test_a_reset_of_a_run_not_sticky_or_closed_or_reset_already_changes_nothing() -> None:
    plain = ExecutionFactory(task_queue=QUEUE)
    sticky = sticky_run()
    _reset(sticky)
    closed = sticky_run()
    kernel.terminate_workflow_execution(
        closed.namespace, workflow_id=closed.workflow_id, run_id=None, reason="done"
    )
    runs = [plain, sticky, closed]
    before = [state(run) for run in runs]

    for run in runs:
        _reset(run)

    assert [state(run) for run in runs] == before


@pytest.mark.parametrize("where", ["namespace", "queue", "workflow_id", "run_id"])
def test_a_run_of_another_namespace_or_queue_or_unknown_is_refused_and_nothing_moves(where: str) -> None:
    run = sticky_run()
    signal(run)
    before = state(run)
    scope = kernel.TaskScope(NamespaceFactory().id if where == "namespace" else run.namespace_id, QUEUE)
    if where == "queue":
        scope = kernel.TaskScope(run.namespace_id, STICKY)
    workflow_id = "someone-else" if where == "workflow_id" else run.workflow_id
    run_id = str(uuid.uuid4()) if where == "run_id" else str(run.run_id)

    with pytest.raises(ChronicleError) as refused:
        kernel.reset_sticky_task_queue(scope=scope, workflow_id=workflow_id, run_id=run_id)

    assert refused.value.code == ErrorCode.NOT_FOUND and refused.value.message == "task not found"
    assert state(run) == before


def test_a_retried_task_keeps_its_backoff_when_it_moves() -> None:
    run = sticky_run()
    signal(run)
    later = timezone.now() + timedelta(minutes=5)
    Task.objects.filter(run_id=run.run_id).update(visible_at=later)

    _reset(run)

    moved = Task.objects.get(run_id=run.run_id)
    assert moved.task_queue == QUEUE and moved.visible_at == later
    assert poll_once(run.namespace, QUEUE, "workflow", "w2") is None, "not before its time"
