"""Reset points: where a run may be reset to, and what the UI shows about each.

A point is a ``workflow_task_finish_event_id`` (a ``WorkflowTaskCompleted``, ``Failed``,
``TimedOut`` or ``Started`` event). :func:`resolve_reset_point` turns an explicit id, a
quick pick or a build id into one; :func:`reset_points` and :func:`builds_seen` are the
UI's read of every eligible point with a summary of what followed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.db.models.fields.json import KT

from chronicle.errors import invalid
from history.models import (
    HistoryEvent,
    WorkflowExecution,
    time_from_epoch,
)
from history.vocabulary import EventType

RESET_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW"
FINISH_EVENTS = frozenset(
    {
        EventType.WORKFLOW_TASK_COMPLETED,
        EventType.WORKFLOW_TASK_FAILED,
        EventType.WORKFLOW_TASK_TIMED_OUT,
        EventType.WORKFLOW_TASK_STARTED,
    }
)
FAILURE_EVENTS = frozenset(
    {
        EventType.WORKFLOW_TASK_FAILED,
        EventType.WORKFLOW_TASK_TIMED_OUT,
        EventType.ACTIVITY_TASK_FAILED,
        EventType.ACTIVITY_TASK_TIMED_OUT,
        EventType.START_CHILD_WORKFLOW_EXECUTION_FAILED,
        EventType.CHILD_WORKFLOW_EXECUTION_FAILED,
        EventType.CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.WORKFLOW_EXECUTION_FAILED,
        EventType.WORKFLOW_EXECUTION_TIMED_OUT,
    }
)


@dataclass(frozen=True)
class BuildIdPoint:
    """The first workflow task a given worker build completed: where that build's decisions begin."""

    build_id: str


QuickPick = Literal["first", "last", "before_failure"]
ResetPoint = int | QuickPick | BuildIdPoint


def resolve_reset_point(base: WorkflowExecution, point: ResetPoint) -> int:
    """The ``workflow_task_finish_event_id`` that ``point`` names in ``base``'s history.

    ``point`` is an explicit event id, a quick pick ("first"/"last" workflow task, or
    "before_failure": the last one completed before the run's first failure) or a
    :class:`BuildIdPoint`. A point the run does not have is a clear ``invalid`` error.
    """
    if isinstance(point, BuildIdPoint):
        return _first_completed_by_build(base, point.build_id)
    if point == "before_failure":
        return _last_completed_before_failure(base)
    if point == "first" or point == "last":
        return _first_or_last_task(base, first=point == "first")
    if not isinstance(point, int) or isinstance(point, bool):
        raise invalid(
            "event_id must be an integer, or reset_type FirstWorkflowTask, LastWorkflowTask, "
            "LastWorkflowTaskBeforeFailure or a build id"
        )
    event = HistoryEvent.objects.filter(run=base, shard_id=base.shard_id, event_id=point).first()
    if event is None or point <= 1:
        raise invalid(f"event {point} is not in the run's history", event_id=point)
    if event.event_type not in FINISH_EVENTS:
        raise invalid(
            f"event {point} is {event.event_type}; a reset point must be a WorkflowTaskCompleted "
            "(or WorkflowTaskFailed, WorkflowTaskTimedOut, WorkflowTaskStarted) event",
            event_id=point,
            event_type=event.event_type,
        )
    return point


def _completed_tasks(base: WorkflowExecution) -> Any:
    return HistoryEvent.objects.filter(
        run=base, shard_id=base.shard_id, event_type=EventType.WORKFLOW_TASK_COMPLETED
    )


def _first_or_last_task(base: WorkflowExecution, *, first: bool) -> int:
    order = "event_id" if first else "-event_id"
    found = _completed_tasks(base).order_by(order).values_list("event_id", flat=True).first()
    if found is None:
        # Temporal's fallback: the event after the first workflow task's Scheduled.
        scheduled = (
            HistoryEvent.objects.filter(
                run=base, shard_id=base.shard_id, event_type=EventType.WORKFLOW_TASK_SCHEDULED
            )
            .order_by("event_id")
            .values_list("event_id", flat=True)
            .first()
        )
        found = scheduled + 1 if scheduled is not None else None
    if found is None or found >= base.next_event_id:
        raise invalid("the run has no workflow task to reset to")
    return int(found)


def first_failure_event_id(base: WorkflowExecution) -> int | None:
    """The run's first failure event (a failed or timed-out task, activity, child or run).

    A ``WorkflowTaskFailed`` written by an earlier reset is bookkeeping, not a failure.
    """
    failures = HistoryEvent.objects.filter(
        run=base, shard_id=base.shard_id, event_type__in=FAILURE_EVENTS
    ).exclude(event_type=EventType.WORKFLOW_TASK_FAILED, attributes__cause=RESET_CAUSE)
    found = failures.order_by("event_id").values_list("event_id", flat=True).first()
    return int(found) if found is not None else None


def _last_completed_before_failure(base: WorkflowExecution) -> int:
    failure = first_failure_event_id(base)
    if failure is None:
        raise invalid("the run has no failure to reset before")
    found = (
        _completed_tasks(base)
        .filter(event_id__lt=failure)
        .order_by("-event_id")
        .values_list("event_id", flat=True)
        .first()
    )
    if found is None:
        raise invalid(
            f"no workflow task completed before the first failure (event {failure})", event_id=failure
        )
    return int(found)


def _first_completed_by_build(base: WorkflowExecution, build_id: str) -> int:
    if not build_id:
        raise invalid("a build id is required")
    found = (
        _completed_tasks(base)
        .filter(attributes__worker_version__build_id=build_id)
        .order_by("event_id")
        .values_list("event_id", flat=True)
        .first()
    )
    if found is None:
        raise invalid(f"no workflow task of the run was completed by build {build_id!r}", build_id=build_id)
    return int(found)


@dataclass
class ResetPointSummary:
    """One eligible point (a ``WorkflowTaskCompleted``) and what happened up to the next one."""

    event_id: int
    event_time: datetime
    build_id: str
    events_by_type: dict[str, int] = field(default_factory=dict)
    activities: dict[str, int] = field(default_factory=dict)  # "Charge completed" -> count
    signals: dict[str, int] = field(default_factory=dict)  # signal name -> count
    timers_fired: int = 0


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


_ACTIVITY_OUTCOMES: dict[str, str] = {
    EventType.ACTIVITY_TASK_COMPLETED: "completed",
    EventType.ACTIVITY_TASK_FAILED: "failed",
    EventType.ACTIVITY_TASK_TIMED_OUT: "timed out",
    EventType.ACTIVITY_TASK_CANCELED: "canceled",
}
_TASK_NOISE = frozenset(
    {EventType.WORKFLOW_TASK_SCHEDULED, EventType.WORKFLOW_TASK_STARTED, EventType.WORKFLOW_TASK_COMPLETED}
)


def reset_points(base: WorkflowExecution) -> list[ResetPointSummary]:
    """Every point ``base`` can be reset to, each with a summary of the events after it.

    One pass over the run's events that reads only the few attributes it summarises (no
    payloads), so it stays cheap for long histories.
    """
    rows = (
        HistoryEvent.objects.filter(run=base, shard_id=base.shard_id)
        .order_by("event_id")
        .annotate(
            activity_type=KT("attributes__activity_type__name"),
            scheduled_id=KT("attributes__scheduled_event_id"),
            signal_name=KT("attributes__signal_name"),
            build_id=KT("attributes__worker_version__build_id"),
            epoch=HistoryEvent.epoch_time(),
        )
        .values_list(
            "event_id", "event_type", "epoch", "activity_type", "scheduled_id", "signal_name", "build_id"
        )
    )
    points: list[ResetPointSummary] = []
    activity_names: dict[int, str] = {}
    for event_id, kind, epoch, activity_type, scheduled_id, signal_name, build_id in rows.iterator(2000):
        if kind == EventType.ACTIVITY_TASK_SCHEDULED:
            activity_names[event_id] = str(activity_type or "")
        if kind == EventType.WORKFLOW_TASK_COMPLETED:
            points.append(ResetPointSummary(event_id, time_from_epoch(epoch), str(build_id or "")))
            continue
        if not points or kind in _TASK_NOISE:
            continue
        segment = points[-1]
        _count(segment.events_by_type, kind)
        if kind in _ACTIVITY_OUTCOMES:
            name = activity_names.get(int(scheduled_id or 0), "")
            _count(segment.activities, f"{name} {_ACTIVITY_OUTCOMES[kind]}".strip())
        elif kind == EventType.WORKFLOW_EXECUTION_SIGNALED:
            _count(segment.signals, str(signal_name or ""))
        elif kind == EventType.TIMER_FIRED:
            segment.timers_fired += 1
    return points


def builds_seen(points: list[ResetPointSummary]) -> list[str]:
    """The worker builds that completed the run's workflow tasks, in order of first appearance."""
    return list(dict.fromkeys(p.build_id for p in points if p.build_id))
