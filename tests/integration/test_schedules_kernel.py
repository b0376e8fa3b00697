"""Schedules through the kernel on real PostgreSQL: catch-up, overlap bookkeeping, wake-ups."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from chronicle.errors import ChronicleError
from history import kernel
from history.kernel.schedules import SCHEDULED_START_TIME, fire_schedule_timers_txn
from history.models import ExecutionStatus, Schedule, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.factories import NamespaceFactory, scope_of

pytestmark = pytest.mark.django_db


def _definition(every: int = 1, **policy: Any) -> kernel.ScheduleDefinition:
    return kernel.ScheduleDefinition(
        spec={"intervals": [{"every": every}]},
        action={"workflow_type": "Report", "workflow_id": "report", "task_queue": "q"},
        policy=policy,
    )


def _fire_now(schedule: Schedule) -> Schedule:
    """Fire the schedule's timer rows as the shard owner would, then reload it."""
    with transaction.atomic():
        fire_schedule_timers_txn(
            list(TimerTask.objects.filter(schedule=schedule).values_list("id", flat=True)),
            [schedule.shard_id],
        )
    schedule.refresh_from_db()
    return schedule


def _runs(namespace: Namespace) -> list[WorkflowExecution]:
    return list(WorkflowExecution.objects.filter(namespace=namespace).order_by("workflow_id"))


def test_after_downtime_only_times_inside_the_catchup_window_fire() -> None:
    ns = NamespaceFactory()
    schedule = kernel.create_schedule(ns, "nightly", _definition(overlap="ALLOW_ALL", catchup_window=10))
    # The daemon was down for a minute: the cursor is a minute behind.
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=timezone.now() - timedelta(seconds=60))
    schedule = _fire_now(schedule)
    assert 45 <= schedule.num_actions_missed_catchup_window <= 51
    assert 9 <= schedule.num_actions <= 11
    assert len(_runs(ns)) == schedule.num_actions
    timer = TimerTask.objects.get(schedule=schedule)
    assert timer.kind == TimerKind.SCHEDULE and timer.fire_at > timezone.now() - timedelta(seconds=1)


def test_skip_counts_overlaps_and_a_closed_run_wakes_the_schedule() -> None:
    ns = NamespaceFactory()
    schedule = kernel.create_schedule(ns, "s", _definition(overlap="SKIP"))
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=timezone.now() - timedelta(seconds=3))
    schedule = _fire_now(schedule)
    assert schedule.num_actions == 1
    assert schedule.num_actions_skipped_overlap >= 2
    (run,) = _runs(ns)
    assert run.workflow_id.startswith("report-") and run.workflow_id.endswith("Z")
    assert run.search_attributes["ChronicleScheduledById"] == "s"
    assert SCHEDULED_START_TIME in run.search_attributes

    TimerTask.objects.filter(schedule=schedule).delete()
    kernel.terminate_workflow_execution(ns, workflow_id=run.workflow_id, run_id=None, reason="done")
    # the kernel's close path left the schedule a timer due now
    wake = TimerTask.objects.get(schedule=schedule)
    assert wake.fire_at <= timezone.now()
    schedule = _fire_now(schedule)
    assert str(run.run_id) not in [a["run_id"] for a in schedule.running_actions]


def test_buffer_all_starts_the_buffered_times_one_after_another() -> None:
    ns = NamespaceFactory()
    schedule = kernel.create_schedule(ns, "b", _definition(overlap="BUFFER_ALL"))
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=timezone.now() - timedelta(seconds=3))
    schedule = _fire_now(schedule)
    assert schedule.num_actions == 1 and len(schedule.buffered_starts) >= 2
    buffered = len(schedule.buffered_starts)
    first = schedule.running_actions[0]
    kernel.terminate_workflow_execution(ns, workflow_id=first["workflow_id"], run_id=None)
    schedule = _fire_now(schedule)
    assert schedule.num_actions == 2
    assert len(schedule.buffered_starts) <= buffered  # one left the buffer (more may have joined)
    assert schedule.num_actions_skipped_overlap == 0


def test_terminate_other_closes_the_running_run_in_the_same_transaction() -> None:
    ns = NamespaceFactory()
    schedule = kernel.create_schedule(ns, "t", _definition(overlap="TERMINATE_OTHER"))
    kernel.trigger_schedule(ns, "t")
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=timezone.now() - timedelta(seconds=1.5))
    schedule = _fire_now(schedule)
    statuses = [r.status for r in _runs(ns)]
    assert statuses.count(ExecutionStatus.RUNNING) == 1
    assert ExecutionStatus.TERMINATED in statuses


def test_limited_actions_stop_at_zero() -> None:
    ns = NamespaceFactory()
    definition = kernel.ScheduleDefinition(
        spec={"intervals": [{"every": 1}]},
        action={"workflow_type": "Report", "workflow_id": "r", "task_queue": "q"},
        policy={"overlap": "ALLOW_ALL"},
        limited_actions=True,
        remaining_actions=2,
    )
    schedule = kernel.create_schedule(ns, "l", definition)
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=timezone.now() - timedelta(seconds=5))
    schedule = _fire_now(schedule)
    assert schedule.num_actions == 2 and schedule.remaining_actions == 0
    assert not TimerTask.objects.filter(schedule=schedule).exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"spec": {"cron_expressions": ["61 * * * *"]}}, "cron"),
        ({"policy": {"overlap": "SOMETIMES"}}, "overlap"),
        ({"action": {"workflow_type": "", "workflow_id": "x", "task_queue": "q"}}, "workflow_type"),
    ],
)
def test_bad_definitions_are_refused_before_anything_is_written(change: dict[str, Any], message: str) -> None:
    ns = NamespaceFactory()
    base = _definition()
    definition = kernel.ScheduleDefinition(
        spec=change.get("spec", base.spec),
        action=change.get("action", base.action),
        policy=change.get("policy", base.policy),
    )
    with pytest.raises(ChronicleError, match=message):
        kernel.create_schedule(ns, "bad", definition)
    assert not Schedule.objects.filter(namespace=ns).exists()


def test_cancel_other_requests_cancellation_and_starts_after_the_close() -> None:
    ns = NamespaceFactory()
    # Every minute, from a cursor one interval back: another action falls due between the
    # two firings below only if a minute boundary passes between them (every second, a
    # slow machine crossed a second's boundary there and buffered a third start).
    schedule = kernel.create_schedule(ns, "c", _definition(every=60, overlap="CANCEL_OTHER"))
    kernel.trigger_schedule(ns, "c")
    (first,) = _runs(ns)
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=timezone.now() - timedelta(seconds=60.5))
    schedule = _fire_now(schedule)
    first.refresh_from_db()
    assert first.cancel_requested and first.is_running
    assert len(schedule.buffered_starts) == 1 and schedule.num_actions == 1
    kernel.terminate_workflow_execution(ns, workflow_id=first.workflow_id, run_id=None)  # the run gives up
    schedule = _fire_now(schedule)
    assert schedule.num_actions >= 2 and schedule.buffered_starts == []


def test_pause_on_failure_pauses_when_a_started_run_fails() -> None:
    ns = NamespaceFactory()
    schedule = kernel.create_schedule(ns, "p", _definition(overlap="SKIP", pause_on_failure=True))
    kernel.trigger_schedule(ns, "p")
    (run,) = _runs(ns)
    task = poll_once(ns, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[{"command_type": "FailWorkflowExecution", "attributes": {"failure": {"message": "boom"}}}],
    )
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=timezone.now() - timedelta(seconds=1.5))
    schedule = _fire_now(schedule)
    assert schedule.paused and run.workflow_id in schedule.note
    assert schedule.num_actions == 1  # nothing more started
    assert not TimerTask.objects.filter(schedule=schedule).exists()


def test_unpause_does_not_catch_up_the_paused_time() -> None:
    ns = NamespaceFactory()
    schedule = kernel.create_schedule(ns, "u", _definition(overlap="ALLOW_ALL"))
    kernel.pause_schedule(ns, "u", paused=True, note="hold")
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=timezone.now() - timedelta(seconds=30))
    schedule = kernel.pause_schedule(ns, "u", paused=False, note="")
    assert schedule.note == "Unpaused via API"
    schedule = _fire_now(schedule)
    assert schedule.num_actions <= 1 and schedule.num_actions_missed_catchup_window == 0
