"""A sticky task's schedule-to-start timeout, as the timer queue fires it.

On the real PostgreSQL, through the kernel: while the worker of the run's sticky queue
still polls it, the timeout leaves the task where it is and checks again a timeout later
(a busy worker falls behind; moving its tasks would make each one a full replay
elsewhere). Once that worker is gone, the timeout moves the task to the normal queue.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from history import kernel
from history.kernel.timers import ShardFence, fire_timers
from history.models import HistoryEvent, Shard, Task, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import STICKY_POLLER_LIVENESS, poll_once
from matching.models import Poller
from tests.factories import ExecutionFactory, made_sticky

pytestmark = pytest.mark.django_db

QUEUE, STICKY = "orders", "orders-sticky-w1"


def _sticky_task_waiting() -> tuple[WorkflowExecution, TimerTask]:
    """A run sticky to ``STICKY`` with a signal's workflow task waiting there, and the
    task's sticky timeout."""
    run = ExecutionFactory(task_queue=QUEUE)
    made_sticky(run, STICKY, 2)
    kernel.signal_workflow_execution(
        run.namespace, workflow_id=run.workflow_id, run_id=None, signal_name="wake", input=[]
    )
    timer = TimerTask.objects.get(run_id=run.run_id, kind=TimerKind.STICKY_TIMEOUT)
    return run, timer


def _poller_seen(run: WorkflowExecution, ago: timedelta) -> None:
    Poller.objects.create(
        namespace=run.namespace,
        task_queue=STICKY,
        kind="workflow",
        identity="w1",
        last_seen_at=timezone.now() - ago,
    )


def _fire(run: WorkflowExecution, timer: TimerTask) -> int:
    Shard.objects.update_or_create(shard_id=run.shard_id, defaults={"range_id": 1})
    return fire_timers(ShardFence(run.shard_id, 1), [(timer.id, str(run.run_id))])


def _event_types(run: WorkflowExecution) -> list[str]:
    events = HistoryEvent.objects.filter(run_id=run.run_id).order_by("event_id")
    return list(events.values_list("event_type", flat=True))


def test_a_sticky_task_stays_with_a_worker_that_still_polls_its_queue() -> None:
    run, timer = _sticky_task_waiting()
    _poller_seen(run, timedelta(seconds=1))
    before = _event_types(run)

    assert _fire(run, timer) == 0

    assert _event_types(run) == before, "no timeout was written"
    pushed = TimerTask.objects.get(pk=timer.pk)
    assert pushed.fire_at >= timezone.now() + timedelta(seconds=1), "the check comes again a timeout later"
    tasks = Task.objects.filter(run_id=run.run_id, kind="workflow")
    assert list(tasks.values_list("task_queue", flat=True)) == [STICKY]
    partial = poll_once(run.namespace, STICKY, "workflow", "w1")
    assert partial is not None, "the sticky worker still gets its task"
    assert partial["history"]["events"][0]["event_type"] != "WorkflowExecutionStarted"


def test_a_sticky_task_whose_worker_stopped_polling_times_out_to_the_normal_queue() -> None:
    run, timer = _sticky_task_waiting()
    _poller_seen(run, STICKY_POLLER_LIVENESS + timedelta(seconds=5))

    assert _fire(run, timer) == 1

    types = _event_types(run)
    assert types[-2:] == ["WorkflowTaskTimedOut", "WorkflowTaskScheduled"]
    timed_out = HistoryEvent.objects.get(run_id=run.run_id, event_type="WorkflowTaskTimedOut")
    assert timed_out.attributes["timeout_type"] == "SCHEDULE_TO_START"
    assert not TimerTask.objects.filter(pk=timer.pk).exists()
    task = poll_once(run.namespace, QUEUE, "workflow", "w2")
    assert task is not None and task["history"]["events"][0]["event_type"] == "WorkflowExecutionStarted"


def test_a_sticky_timeout_for_a_task_already_started_changes_nothing() -> None:
    run, timer = _sticky_task_waiting()
    _poller_seen(run, timedelta(seconds=1))
    assert poll_once(run.namespace, STICKY, "workflow", "w1") is not None
    before = _event_types(run)

    assert _fire(run, timer) == 0

    assert _event_types(run) == before
    assert not TimerTask.objects.filter(pk=timer.pk).exists(), "a stale timeout is dropped, not pushed"
