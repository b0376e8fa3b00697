"""The shard owner's transfer duties and schedule firings stamp by the database's clock.

As in ``test_owner_clock``: the setup writes its rows by the real clock, then this process's
clock moves an hour ahead (a clock stepped by hand or by a broken time sync) and the owner
carries the due rows. Every event it writes, on the run that asked and on the other run,
and every run it starts, must carry the database's time, so each history stays in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models.functions import Now

from chronicle import clock
from history import kernel
from history.models import HistoryEvent, Schedule, TimerKind, TimerTask, WorkflowExecution
from history.shard_owner import ShardOwner
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.factories import ExecutionFactory, NamespaceFactory, scope_of
from tests.integration import test_owner_clock
from tests.integration.test_owner_clock import HOUR, Skew, _owning, db_time

pytestmark = pytest.mark.django_db
skew = test_owner_clock.skew  # the fixture moving this process's clock


def _complete(run: WorkflowExecution, *commands: dict[str, Any]) -> None:
    """The run's workflow task completed with ``commands`` (a frontend call, real clock)."""
    task = poll_once(run.namespace, run.task_queue, "workflow", "w1")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=list(commands)
    )


def _start_child(workflow_id: str) -> dict[str, Any]:
    return {
        "command_type": "StartChildWorkflowExecution",
        "attributes": {"workflow_id": workflow_id, "workflow_type": {"name": "Kid"}},
    }


def _history(run: WorkflowExecution) -> list[HistoryEvent]:
    return list(HistoryEvent.objects.filter(run_id=run.run_id).order_by("event_id"))


def _stamped_between(events: Iterable[HistoryEvent], before: datetime, after: datetime) -> None:
    """The events carry the database's time of the pass, and every history stays in order."""
    events = list(events)
    assert events
    for event in events:
        assert before <= event.event_time <= after, (event.event_type, event.event_time, before, after)


def _in_order(*runs: WorkflowExecution) -> None:
    for run in runs:
        stamps = [event.event_time for event in _history(run)]
        assert stamps == sorted(stamps), f"{run.workflow_id}'s history is out of order"


def _carry(owner: ShardOwner) -> tuple[datetime, datetime]:
    """One pass of the owner's due rows; the database's time before and after it."""
    owner.refresh_next_fire()
    before = db_time()
    assert owner.fire_due_timers()
    return before, db_time()


def _new_events(run: WorkflowExecution, after_event_id: int) -> list[HistoryEvent]:
    return [event for event in _history(run) if event.event_id > after_event_id]


def _child_run(workflow_id: str) -> WorkflowExecution:
    return WorkflowExecution.objects.get(workflow_id=workflow_id)


def test_an_owner_ahead_in_time_starts_a_child_and_records_its_start_by_the_database(skew: Skew) -> None:
    parent: WorkflowExecution = ExecutionFactory()
    _complete(parent, _start_child("kid-start"))
    seen = _history(parent)[-1].event_id
    owner = _owning("ahead", parent.shard_id)
    skew(HOUR)

    before, after = _carry(owner)

    child = _child_run("kid-start")
    assert before <= child.start_time <= after and child.execution_time == child.start_time
    _stamped_between(_history(child), before, after)
    recorded = _new_events(parent, seen)
    assert [e.event_type for e in recorded][:1] == ["ChildWorkflowExecutionStarted"]
    _stamped_between(recorded, before, after)
    _in_order(parent, child)


def test_an_owner_ahead_in_time_reports_a_closed_child_and_applies_the_close_policy(skew: Skew) -> None:
    parent: WorkflowExecution = ExecutionFactory()
    _complete(parent, _start_child("kid-closed"), _start_child("kid-policy"))
    _carry(_owning("ahead", parent.shard_id))
    closed, policed = _child_run("kid-closed"), _child_run("kid-policy")
    skew(timedelta(0))
    kernel.terminate_workflow_execution(closed.namespace, workflow_id="kid-closed", run_id=None)
    seen = _history(parent)[-1].event_id
    skew(HOUR)

    before, after = _carry(_owning("ahead", closed.shard_id))  # the close's duty is the child's

    reported = _new_events(parent, seen)
    assert "ChildWorkflowExecutionTerminated" in [e.event_type for e in reported]
    _stamped_between(reported, before, after)

    skew(timedelta(0))
    kernel.terminate_workflow_execution(parent.namespace, workflow_id=parent.workflow_id, run_id=None)
    seen = _history(policed)[-1].event_id
    skew(HOUR)
    before, after = _carry(_owning("ahead", parent.shard_id))  # the close policy's duty

    terminated = _new_events(policed, seen)
    assert [e.event_type for e in terminated] == ["WorkflowExecutionTerminated"]
    _stamped_between(terminated, before, after)
    _in_order(parent, closed, policed)


@pytest.mark.parametrize(
    ("command", "received", "recorded"),
    [
        ("SignalExternalWorkflowExecution", "WorkflowExecutionSignaled", "ExternalWorkflowExecutionSignaled"),
        (
            "RequestCancelExternalWorkflowExecution",
            "WorkflowExecutionCancelRequested",
            "ExternalWorkflowExecutionCancelRequested",
        ),
    ],
)
def test_an_owner_ahead_in_time_signals_and_cancels_other_runs_by_the_database(
    skew: Skew, command: str, received: str, recorded: str
) -> None:
    source: WorkflowExecution = ExecutionFactory()
    target: WorkflowExecution = ExecutionFactory(namespace=source.namespace)
    attributes = {"execution": {"workflow_id": target.workflow_id}, "signal_name": "hi"}
    _complete(source, {"command_type": command, "attributes": attributes})
    seen_source, seen_target = _history(source)[-1].event_id, _history(target)[-1].event_id
    skew(HOUR)

    before, after = _carry(_owning("ahead", source.shard_id))

    on_target = _new_events(target, seen_target)
    assert on_target[0].event_type == received
    _stamped_between(on_target, before, after)
    on_source = _new_events(source, seen_source)
    assert on_source[0].event_type == recorded
    _stamped_between(on_source, before, after)
    _in_order(source, target)


def test_an_owner_ahead_in_time_fires_a_schedule_by_the_database(skew: Skew) -> None:
    """Due times are the database's (not an hour of them), the run a firing terminates
    stamps its lock's time, and the run it starts starts at the schedules' lock's time."""
    ns: Namespace = NamespaceFactory()
    definition = kernel.ScheduleDefinition(
        spec={"intervals": [{"every": 60}]},
        action={"workflow_type": "Report", "workflow_id": "report", "task_queue": "q"},
        policy={"overlap": "TERMINATE_OTHER"},
    )
    schedule = kernel.create_schedule(ns, "minutely", definition)
    kernel.trigger_schedule(ns, "minutely")
    [old] = WorkflowExecution.objects.filter(namespace=ns)
    seen = _history(old)[-1].event_id
    Schedule.objects.filter(pk=schedule.pk).update(cursor_time=Now() - timedelta(seconds=61))
    TimerTask.objects.filter(schedule=schedule).update(fire_at=Now())
    skew(HOUR)

    before, after = _carry(_owning("ahead", schedule.shard_id))

    schedule.refresh_from_db()
    assert 2 <= schedule.num_actions <= 3, "one or two minutes were due, not an hour of them"
    new = WorkflowExecution.objects.filter(namespace=ns).exclude(run_id=old.run_id)
    assert new and all(before <= run.start_time <= after for run in new)
    for run in new:
        _stamped_between(_history(run), before, after)
    terminated = _new_events(old, seen)
    assert terminated[0].event_type == "WorkflowExecutionTerminated"
    _stamped_between(terminated, before, after)
    _in_order(old, *new)
    timer = TimerTask.objects.get(schedule=schedule, kind=TimerKind.SCHEDULE)
    assert timer.fire_at <= after + timedelta(seconds=61), "the next firing is by the database's clock"


def test_time_skipping_starts_a_child_at_the_database_time_plus_the_skipped_offset(
    skew: Skew, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent: WorkflowExecution = ExecutionFactory()
    _complete(parent, _start_child("kid-skipped"))
    owner = _owning("skipping", parent.shard_id)
    clock.skip_by(timedelta(days=1))
    skew(-HOUR)  # the process's real clock; the skipped clock is the database's plus the offset
    monkeypatch.setattr(clock, "now", clock.skipped_now)
    before = db_time() + clock.offset()

    owner.refresh_next_fire()
    assert owner.fire_due_timers()

    child = _child_run("kid-skipped")
    assert before <= child.start_time <= db_time() + clock.offset()
    started = [e for e in _history(parent) if e.event_type == "ChildWorkflowExecutionStarted"]
    assert started and before <= started[0].event_time <= db_time() + clock.offset()
