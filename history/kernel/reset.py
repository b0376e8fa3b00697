"""Reset: start a new run from a copy of a run's history up to one workflow task.

Temporal's ``ResetWorkflowExecution`` (temporal-semantics §11). The target is a
``workflow_task_finish_event_id``: the id of a ``WorkflowTaskCompleted``, ``Failed``,
``TimedOut`` or ``Started`` event. The new run gets events ``1 .. id-1`` of the base
run, a synthetic ``WorkflowTaskStarted`` if the task at that point never started, a
``WorkflowTaskFailed`` with cause ``RESET_WORKFLOW`` naming the reason and both runs,
the signals recorded after the point (unless asked otherwise) and a new workflow
task. The current run of the workflow id, if open, is terminated with the reason.

This is the one place where the server derives mutable state from history: the
pending activities, timers, search attributes and counters of the new run are
rebuilt from the copied events (:func:`replay_state`), because the base run's rows
describe its present, not the reset point.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import IntegrityError, connection, transaction
from django.db.models import Count
from django.db.models.fields.json import KT
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.faults import crash_point
from history.kernel._mutation import ExecutionMutation
from history.kernel.activity_tasks import restore_activity_txn
from history.kernel.children import restore_child, restore_external_request
from history.kernel.executions import arm_workflow_timeouts, terminate_txn
from history.kernel.locks import lock_execution
from history.kernel.transfers import child_close_event
from history.kernel.versioning import current_build_id
from history.models import (
    ExecutionStatus,
    ExternalRequestKind,
    HistoryEvent,
    PendingActivity,
    PendingChildExecution,
    SignalRequest,
    TimerKind,
    TimerTask,
    WorkflowExecution,
    time_from_epoch,
)
from history.vocabulary import EventType
from namespaces.models import Namespace
from namespaces.search_attributes import merge_search_attributes

RESET_CAUSE = "WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW"
RESETTER_IDENTITY = "history-resetter"
FINISH_EVENTS = frozenset(
    {
        EventType.WORKFLOW_TASK_COMPLETED,
        EventType.WORKFLOW_TASK_FAILED,
        EventType.WORKFLOW_TASK_TIMED_OUT,
        EventType.WORKFLOW_TASK_STARTED,
    }
)
ACTIVITY_CLOSE_EVENTS = frozenset(
    {
        EventType.ACTIVITY_TASK_COMPLETED,
        EventType.ACTIVITY_TASK_FAILED,
        EventType.ACTIVITY_TASK_TIMED_OUT,
        EventType.ACTIVITY_TASK_CANCELED,
    }
)
CHILD_END_EVENTS = frozenset(
    {
        EventType.START_CHILD_WORKFLOW_EXECUTION_FAILED,
        EventType.CHILD_WORKFLOW_EXECUTION_COMPLETED,
        EventType.CHILD_WORKFLOW_EXECUTION_FAILED,
        EventType.CHILD_WORKFLOW_EXECUTION_CANCELED,
        EventType.CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.CHILD_WORKFLOW_EXECUTION_TERMINATED,
    }
)
EXTERNAL_INITIATED_EVENTS: dict[str, ExternalRequestKind] = {
    EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: ExternalRequestKind.SIGNAL,
    EventType.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: ExternalRequestKind.CANCEL,
}
EXTERNAL_END_EVENTS = frozenset(
    {
        EventType.EXTERNAL_WORKFLOW_EXECUTION_SIGNALED,
        EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
        EventType.EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
        EventType.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
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
SIDE_EFFECT_EVENTS = {
    EventType.ACTIVITY_TASK_COMPLETED: "activities_completed_after_point",
    EventType.CHILD_WORKFLOW_EXECUTION_STARTED: "children_started_after_point",
    EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: "signals_sent_after_point",
}


@dataclass(frozen=True)
class BuildIdPoint:
    """The first workflow task a given worker build completed: where that build's decisions begin."""

    build_id: str


QuickPick = Literal["first", "last", "before_failure"]
ResetPoint = int | QuickPick | BuildIdPoint


# -- the state at a point of history ----------------------------------------------------------
@dataclass
class PendingTimer:
    timer_id: str
    started_event_id: int
    fire_at: datetime


@dataclass
class PendingChild:
    """A child initiated before the point and not closed by then (started or not)."""

    initiated_event_id: int
    request: dict[str, Any]
    started_run_id: str = ""
    started_event_id: int = 0


@dataclass
class PendingRequest:
    """A signal or cancel sent to another workflow whose outcome came after the point."""

    initiated_event_id: int
    kind: str
    attributes: dict[str, Any]


@dataclass
class ReplayedState:
    """Mutable state as of the end of a prefix of history."""

    wft_scheduled_event_id: int = 0
    wft_started_event_id: int = 0
    last_wft_started_event_id: int = 0
    last_wft_completed_event_id: int = 0
    activities: dict[int, dict[str, Any]] = field(default_factory=dict)  # scheduled id -> attributes
    activity_cancel_requests: dict[int, int] = field(default_factory=dict)
    timers: dict[str, PendingTimer] = field(default_factory=dict)
    children: dict[int, PendingChild] = field(default_factory=dict)  # initiated id -> child
    external_requests: dict[int, PendingRequest] = field(default_factory=dict)
    search_attributes: dict[str, Any] = field(default_factory=dict)
    signal_count: int = 0
    signal_request_ids: list[str] = field(default_factory=list)
    cancel_requested: bool = False

    def apply(self, event_id: int, kind: str, at: datetime, attrs: dict[str, Any]) -> None:
        """Replay one event; ``attrs`` may be the :data:`REPLAYED_KEYS` projection of its attributes."""
        handler = _REPLAY.get(kind)
        if handler is not None:
            handler(self, event_id, attrs, at)
        elif kind in ACTIVITY_CLOSE_EVENTS:
            scheduled = int(attrs.get("scheduled_event_id") or 0)
            self.activities.pop(scheduled, None)
            self.activity_cancel_requests.pop(scheduled, None)
        elif kind in CHILD_END_EVENTS:
            self.children.pop(int(attrs.get("initiated_event_id") or 0), None)
        elif kind in EXTERNAL_INITIATED_EVENTS:
            self.external_requests[event_id] = PendingRequest(
                event_id, EXTERNAL_INITIATED_EVENTS[kind], attrs
            )
        elif kind in EXTERNAL_END_EVENTS:
            self.external_requests.pop(int(attrs.get("initiated_event_id") or 0), None)


def _on_started(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.search_attributes = dict(a.get("search_attributes") or {})


def _on_wft_scheduled(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.wft_scheduled_event_id, s.wft_started_event_id = event_id, 0


def _on_wft_started(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.wft_started_event_id = event_id


def _on_wft_completed(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.last_wft_started_event_id = int(a.get("started_event_id") or 0)
    s.last_wft_completed_event_id = event_id
    s.wft_scheduled_event_id = s.wft_started_event_id = 0


def _on_wft_ended(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.wft_scheduled_event_id = s.wft_started_event_id = 0


def _on_activity_scheduled(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.activities[event_id] = a


def _on_activity_cancel_requested(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.activity_cancel_requests[int(a.get("scheduled_event_id") or 0)] = event_id


def _on_timer_started(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    fire_at = at + timedelta(seconds=float(a.get("start_to_fire_timeout") or 0))
    s.timers[str(a.get("timer_id"))] = PendingTimer(str(a.get("timer_id")), event_id, fire_at)


def _on_timer_ended(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.timers.pop(str(a.get("timer_id")), None)


def _on_child_initiated(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.children[event_id] = PendingChild(event_id, a)


def _on_child_started(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    child = s.children.get(int(a.get("initiated_event_id") or 0))
    if child is not None:
        child.started_run_id = str((a.get("workflow_execution") or {}).get("run_id") or "")
        child.started_event_id = event_id


def _on_upsert(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.search_attributes = merge_search_attributes(s.search_attributes, a.get("search_attributes") or {})


def _on_signaled(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.signal_count += 1
    if a.get("request_id"):
        s.signal_request_ids.append(str(a["request_id"]))


def _on_cancel_requested(s: ReplayedState, event_id: int, a: dict[str, Any], at: datetime) -> None:
    s.cancel_requested = True


_REPLAY = {
    EventType.WORKFLOW_EXECUTION_STARTED: _on_started,
    EventType.WORKFLOW_TASK_SCHEDULED: _on_wft_scheduled,
    EventType.WORKFLOW_TASK_STARTED: _on_wft_started,
    EventType.WORKFLOW_TASK_COMPLETED: _on_wft_completed,
    EventType.WORKFLOW_TASK_FAILED: _on_wft_ended,
    EventType.WORKFLOW_TASK_TIMED_OUT: _on_wft_ended,
    EventType.ACTIVITY_TASK_SCHEDULED: _on_activity_scheduled,
    EventType.ACTIVITY_TASK_CANCEL_REQUESTED: _on_activity_cancel_requested,
    EventType.TIMER_STARTED: _on_timer_started,
    EventType.TIMER_FIRED: _on_timer_ended,
    EventType.TIMER_CANCELED: _on_timer_ended,
    EventType.START_CHILD_WORKFLOW_EXECUTION_INITIATED: _on_child_initiated,
    EventType.CHILD_WORKFLOW_EXECUTION_STARTED: _on_child_started,
    "UpsertWorkflowSearchAttributes": _on_upsert,
    EventType.WORKFLOW_EXECUTION_SIGNALED: _on_signaled,
    EventType.WORKFLOW_EXECUTION_CANCEL_REQUESTED: _on_cancel_requested,
}


# The attributes replay reads. Payloads (inputs, results, failures, memos) are left in the
# database: a long history replays from these few keys, and the attributes of the few
# activities, children and requests still pending at the point are read whole afterwards.
REPLAYED_KEYS = (
    "scheduled_event_id",
    "initiated_event_id",
    "started_event_id",
    "timer_id",
    "start_to_fire_timeout",
    "request_id",
    "search_attributes",
    "workflow_execution",
    "workflow_id",
    "activity_id",
    "activity_type",
)
_PROJECTION = "jsonb_build_object({})".format(
    ", ".join(f"'{key}', attributes->'{key}'" for key in REPLAYED_KEYS)
)


def replay_state(run: WorkflowExecution, before_event_id: int) -> tuple[ReplayedState, int]:
    """The state of ``run`` just before ``before_event_id``, and how many events precede it.

    Replays the projection of each event, then reads in full the attributes of what is
    still pending (a restored activity or child needs its input).
    """
    state = ReplayedState()
    table = HistoryEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT event_id, event_type, event_time, {_PROJECTION} FROM {table} "
            "WHERE run_id = %s AND event_id < %s ORDER BY event_id",
            [run.run_id, before_event_id],
        )
        count = 0
        for event_id, kind, at, attrs in cursor:
            state.apply(event_id, kind, at, json.loads(attrs) if isinstance(attrs, str) else attrs)
            count += 1
    _read_pending_in_full(run, state)
    return state, count


def _read_pending_in_full(run: WorkflowExecution, state: ReplayedState) -> None:
    pending = [*state.activities, *state.children, *state.external_requests]
    if not pending:
        return
    full = dict(
        HistoryEvent.objects.filter(run=run, event_id__in=pending).values_list("event_id", "attributes")
    )
    for event_id in state.activities:
        state.activities[event_id] = full[event_id]
    for event_id, child in state.children.items():
        child.request = full[event_id]
    for event_id, request in state.external_requests.items():
        request.attributes = full[event_id]


# -- choosing the point -----------------------------------------------------------------------
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
    event = HistoryEvent.objects.filter(run=base, event_id=point).first()
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
    return HistoryEvent.objects.filter(run=base, event_type=EventType.WORKFLOW_TASK_COMPLETED)


def _first_or_last_task(base: WorkflowExecution, *, first: bool) -> int:
    order = "event_id" if first else "-event_id"
    found = _completed_tasks(base).order_by(order).values_list("event_id", flat=True).first()
    if found is None:
        # Temporal's fallback: the event after the first workflow task's Scheduled.
        scheduled = (
            HistoryEvent.objects.filter(run=base, event_type=EventType.WORKFLOW_TASK_SCHEDULED)
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
    failures = HistoryEvent.objects.filter(run=base, event_type__in=FAILURE_EVENTS).exclude(
        event_type=EventType.WORKFLOW_TASK_FAILED, attributes__cause=RESET_CAUSE
    )
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


# -- the points a run offers ------------------------------------------------------------------
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
        HistoryEvent.objects.filter(run=base)
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


# -- what a reset would do --------------------------------------------------------------------
@dataclass
class ResetPlan:
    """What resetting ``base`` to ``event_id`` keeps, drops and re-applies (no writes)."""

    base: WorkflowExecution
    current: WorkflowExecution
    event_id: int
    events_kept: int
    state: ReplayedState
    signals_after: list[tuple[uuid.UUID, dict[str, Any]]]  # (recorded on run, signal attributes)
    reapply_signals: bool = True

    @property
    def signals(self) -> list[tuple[uuid.UUID, dict[str, Any]]]:
        """The signals the new run gets again: all those after the point, or none."""
        return self.signals_after if self.reapply_signals else []

    def preview(self) -> dict[str, Any]:
        dropped = dict(
            HistoryEvent.objects.filter(run=self.base, event_id__gte=self.event_id)
            .values("event_type")
            .annotate(n=Count("event_id"))
            .order_by()
            .values_list("event_type", "n")
        )
        children = sorted(self.state.children.values(), key=lambda c: c.initiated_event_id)
        return {
            "base_run_id": str(self.base.run_id),
            "current_run_id": str(self.current.run_id),
            "terminates_current_run": self.current.is_running,
            "reset_event_id": self.event_id,
            "reapply_signals": self.reapply_signals,
            "events_kept": self.events_kept,
            "events_dropped": sum(dropped.values()),
            "events_dropped_by_type": dict(sorted(dropped.items())),
            "signals_to_reapply": [_signal_summary(run, attrs) for run, attrs in self.signals],
            "signals_not_reapplied": [
                _signal_summary(run, attrs) for run, attrs in self.signals_after if not self.reapply_signals
            ],
            "activities_rescheduled": [
                _activity_summary(scheduled, attrs)
                for scheduled, attrs in sorted(self.state.activities.items())
            ],
            "timers_restored": [
                {"timer_id": t.timer_id, "fire_at": t.fire_at.isoformat()} for t in self.state.timers.values()
            ],
            "children_kept": [
                {
                    "initiated_event_id": c.initiated_event_id,
                    "workflow_id": c.request.get("workflow_id", ""),
                    "run_id": c.started_run_id,
                }
                for c in children
                if c.started_run_id
            ],
            "children_to_start": [
                {"initiated_event_id": c.initiated_event_id, "workflow_id": c.request.get("workflow_id", "")}
                for c in children
                if not c.started_run_id
            ],
            "external_requests_reissued": [
                {
                    "initiated_event_id": r.initiated_event_id,
                    "kind": r.kind,
                    "workflow_id": (r.attributes.get("workflow_execution") or {}).get("workflow_id", ""),
                }
                for r in sorted(self.state.external_requests.values(), key=lambda r: r.initiated_event_id)
            ],
            "pending_dropped": _pending_of(self.current),
            **self._side_effects_after_point(),
        }

    def _side_effects_after_point(self) -> dict[str, list[dict[str, Any]]]:
        """What already happened outside the run after the point: the new run may do it again.

        Activities completed, children started and signals sent to other workflows, in the
        base run after the point and in the runs that followed it up to the current one.
        """
        found: dict[str, list[dict[str, Any]]] = {key: [] for key in SIDE_EFFECT_EVENTS.values()}
        for run in _chain_from(self.base, self.current):
            after = self.event_id if run.run_id == self.base.run_id else 0
            for (
                event_id,
                kind,
                workflow_id,
                run_id,
                signal_name,
                scheduled_id,
                activity_id,
                activity_type,
            ) in _side_effect_rows(run, after):
                summary: dict[str, Any] = {"run_id": str(run.run_id), "event_id": event_id}
                if kind == EventType.ACTIVITY_TASK_COMPLETED:
                    summary |= {
                        "scheduled_event_id": scheduled_id or 0,
                        "activity_id": activity_id or "",
                        "activity_type": activity_type or "",
                    }
                elif kind == EventType.CHILD_WORKFLOW_EXECUTION_STARTED:
                    summary |= {"workflow_id": workflow_id or "", "run_id_started": run_id or ""}
                else:
                    summary |= {"workflow_id": workflow_id or "", "signal_name": signal_name or ""}
                found[SIDE_EFFECT_EVENTS[kind]].append(summary)
        return found


def _side_effect_rows(run: WorkflowExecution, after: int) -> list[tuple[Any, ...]]:
    """The side-effect events of ``run`` from event ``after`` on, with the scheduling event of
    each completed activity joined in: a few text columns per row, no payloads."""
    table = HistoryEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT e.event_id, e.event_type, e.attributes->'workflow_execution'->>'workflow_id', "
            "e.attributes->'workflow_execution'->>'run_id', e.attributes->>'signal_name', "
            "s.event_id, s.attributes->>'activity_id', s.attributes->'activity_type'->>'name' "
            f"FROM {table} e LEFT JOIN {table} s ON e.event_type = 'ActivityTaskCompleted' "
            "AND s.run_id = e.run_id AND s.event_id = (e.attributes->>'scheduled_event_id')::bigint "
            "WHERE e.run_id = %s AND e.event_id >= %s AND e.event_type = ANY(%s) ORDER BY e.event_id",
            [run.run_id, after, list(SIDE_EFFECT_EVENTS)],
        )
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


def _signal_summary(run: uuid.UUID, attrs: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": str(run), "signal_name": attrs.get("signal_name", "")}


def _activity_summary(scheduled_event_id: int, attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        "scheduled_event_id": scheduled_event_id,
        "activity_id": attrs.get("activity_id", ""),
        "activity_type": (attrs.get("activity_type") or {}).get("name", ""),
    }


def _pending_of(run: WorkflowExecution) -> dict[str, Any]:
    if not run.is_running:
        return {"activities": [], "timers": []}
    activities = PendingActivity.objects.filter(run=run).order_by("scheduled_event_id")
    timers = TimerTask.objects.filter(run=run, kind=TimerKind.USER_TIMER).order_by("fire_at")
    return {
        "activities": [
            {
                "scheduled_event_id": a.scheduled_event_id,
                "activity_id": a.activity_id,
                "activity_type": a.activity_type,
                "attempt": a.attempt,
            }
            for a in activities
        ],
        "timers": [{"timer_id": t.timer_id, "fire_at": t.fire_at.isoformat()} for t in timers],
    }


def _chain_from(base: WorkflowExecution, current: WorkflowExecution) -> list[WorkflowExecution]:
    """The base run and its successors (continue-as-new, retries) up to the current run."""
    chain = [base]
    run = base
    while run.new_run_id and run.run_id != current.run_id and len(chain) < 1000:
        following = WorkflowExecution.objects.filter(run_id=run.new_run_id).first()
        if following is None:
            break
        chain.append(following)
        run = following
    return chain


def _signals_after(
    base: WorkflowExecution, current: WorkflowExecution, event_id: int
) -> list[tuple[uuid.UUID, dict[str, Any]]]:
    """Signals recorded after the point in the base run and its successors, in order."""
    signals: list[tuple[uuid.UUID, dict[str, Any]]] = []
    for run in _chain_from(base, current):
        after = event_id if run.run_id == base.run_id else 0
        recorded = HistoryEvent.objects.filter(
            run=run, event_type=EventType.WORKFLOW_EXECUTION_SIGNALED, event_id__gte=after
        ).order_by("event_id")
        signals += [(run.run_id, e.attributes) for e in recorded]
        if run.is_running:
            # Signals still buffered behind an in-flight workflow task count too.
            signals += [
                (run.run_id, b["attributes"])
                for b in run.buffered_events
                if b["event_type"] == EventType.WORKFLOW_EXECUTION_SIGNALED
            ]
    return signals


def plan_reset(
    base: WorkflowExecution, current: WorkflowExecution, point: ResetPoint, *, reapply_signals: bool
) -> ResetPlan:
    event_id = resolve_reset_point(base, point)
    state, events_kept = replay_state(base, event_id)
    if not state.wft_scheduled_event_id:
        raise invalid(f"no workflow task is pending just before event {event_id}", event_id=event_id)
    signals = _signals_after(base, current, event_id)
    return ResetPlan(base, current, event_id, events_kept, state, signals, reapply_signals)


def _base_and_current(
    namespace: Namespace, workflow_id: str, run_id: str | None, *, lock: bool
) -> tuple[WorkflowExecution, WorkflowExecution]:
    """The current run (running, else latest) and the base (the given run, else the current)."""
    if lock:
        current = lock_execution(namespace, workflow_id, None)
        if not run_id or str(run_id) == str(current.run_id):
            return current, current
        return lock_execution(namespace, workflow_id, run_id), current
    runs = WorkflowExecution.objects.filter(namespace=namespace, workflow_id=workflow_id)
    current_or_none = (
        runs.filter(status=ExecutionStatus.RUNNING).first() or runs.order_by("-start_time").first()
    )
    if current_or_none is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"workflow execution {workflow_id!r} not found")
    if not run_id:
        return current_or_none, current_or_none
    try:
        given = runs.filter(run_id=uuid.UUID(str(run_id))).first()
    except ValueError:
        raise invalid("run_id must be a UUID") from None
    if given is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"run {run_id} of {workflow_id!r} not found")
    return given, current_or_none


def preview_reset(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    point: ResetPoint,
    reapply_signals: bool = True,
) -> dict[str, Any]:
    """What :func:`reset_workflow_execution` would do, without writing anything."""
    base, current = _base_and_current(namespace, workflow_id, run_id, lock=False)
    return plan_reset(base, current, point, reapply_signals=reapply_signals).preview()


# -- the reset itself -------------------------------------------------------------------------
def reset_workflow_execution(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    point: ResetPoint,
    reason: str,
    reapply_signals: bool = True,
    request_id: str = "",
    identity: str = "",
) -> str:
    """Reset the run (the current one unless ``run_id``) to ``point``; return the new run's id.

    A retried request with the same ``request_id`` returns the run the first one made.
    """
    if not reason.strip():
        raise invalid("reason is required")
    try:
        with transaction.atomic(durable=True):
            base, current = _base_and_current(namespace, workflow_id, run_id, lock=True)
            if request_id and current.create_request_id == request_id:
                return str(current.run_id)
            plan = plan_reset(base, current, point, reapply_signals=reapply_signals)
            new_run_id = _reset_txn(namespace, plan, reason=reason, request_id=request_id, identity=identity)
            crash_point("before_commit")
    except IntegrityError:
        raise ChronicleError(
            ErrorCode.CONFLICT, "another run of this workflow id started during the reset; retry"
        ) from None
    crash_point("after_commit_before_reply")
    return new_run_id


def _reset_txn(namespace: Namespace, plan: ResetPlan, *, reason: str, request_id: str, identity: str) -> str:
    now = timezone.now()
    new = _new_run(plan, now, request_id)
    terminated = plan.current.is_running
    if terminated:
        ending = ExecutionMutation(plan.current, namespace)
        plan.current.reset_run_id = new.run_id
        terminate_txn(ending, reason, None, RESETTER_IDENTITY)
        ending.save()
    if not terminated or plan.base.run_id != plan.current.run_id:
        WorkflowExecution.objects.filter(run_id=plan.base.run_id).update(reset_run_id=new.run_id)
    # Foreign keys are checked at commit, so the copied events and restored rows may be
    # written before the new run's row, which the mutation inserts when it saves.
    new.history_size_bytes = _copy_events(plan, new)
    mutation = ExecutionMutation(new, namespace)
    mutation.now = now
    _fail_reset_task(mutation, plan, reason)
    _restore_pending(mutation, plan.state)
    _restore_children(mutation, plan.state)
    _reapply_signals(mutation, plan, identity)
    _report_children_closed_meanwhile(mutation)
    mutation.schedule_workflow_task()
    arm_workflow_timeouts(mutation)
    mutation.save()
    return str(new.run_id)


_NOT_COPIED = {
    "run_id",
    "status",
    "next_event_id",
    "history_size_bytes",
    "start_time",
    "execution_time",
    "close_time",
    "execution_expiration_time",
    "result",
    "failure",
    "create_request_id",
    "new_run_id",
    "signal_count",
    "cancel_requested",
    "buffered_events",
    "search_attributes",
    "sticky_task_queue",
    "reset_base_run_id",
    "reset_event_id",
    "reset_run_id",
    "assigned_build_id",
}


def _new_run(plan: ResetPlan, now: datetime, request_id: str) -> WorkflowExecution:
    """The reset run's row: the base's settings, the replayed state, clocks from now."""
    base, state = plan.base, plan.state
    settings = {
        f.attname: getattr(base, f.attname)
        for f in WorkflowExecution._meta.concrete_fields
        if f.name not in _NOT_COPIED and not f.name.startswith("wft_") and not f.name.startswith("last_wft")
    }
    return WorkflowExecution(
        **settings,
        run_id=uuid.uuid4(),
        status=ExecutionStatus.RUNNING,
        next_event_id=plan.event_id,
        start_time=now,
        execution_time=now,
        execution_expiration_time=(
            now + timedelta(seconds=base.execution_timeout) if base.execution_timeout else None
        ),
        create_request_id=request_id or str(uuid.uuid4()),
        signal_count=state.signal_count,
        cancel_requested=state.cancel_requested,
        search_attributes=state.search_attributes,
        wft_scheduled_event_id=state.wft_scheduled_event_id,
        wft_started_event_id=state.wft_started_event_id,
        last_wft_started_event_id=state.last_wft_started_event_id,
        last_wft_completed_event_id=state.last_wft_completed_event_id,
        reset_base_run_id=base.run_id,
        reset_event_id=plan.event_id,
        # A reset is how a run leaves a bad build: it goes to the queue's current one.
        assigned_build_id=current_build_id(base.namespace, base.task_queue),
    )


def _copy_events(plan: ResetPlan, new: WorkflowExecution) -> int:
    """Copy events ``1 .. point-1`` server-side (the rows never travel through Python);
    return their size in bytes, the new run's starting history size.

    The size is PostgreSQL's text form of each event's attributes, a little above the
    compact JSON the kernel counts as it appends: the limits err on the safe side.
    """
    table = HistoryEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH copied AS (INSERT INTO {table} "
            "(run_id, shard_id, event_id, event_type, event_time, attributes) "
            f"SELECT %s, shard_id, event_id, event_type, event_time, attributes FROM {table} "
            "WHERE run_id = %s AND event_id < %s "
            "RETURNING octet_length(attributes::text) + octet_length(event_type) AS size) "
            "SELECT coalesce(sum(size), 0) FROM copied",
            [new.run_id, plan.base.run_id, plan.event_id],
        )
        (size,) = cursor.fetchone() or (0,)
    SignalRequest.objects.bulk_create(
        [SignalRequest(run=new, request_id=r) for r in set(plan.state.signal_request_ids)]
    )
    return int(size)


def _fail_reset_task(m: ExecutionMutation, plan: ResetPlan, reason: str) -> None:
    """Close the workflow task pending at the point as failed by the reset."""
    ex = m.execution
    if not ex.wft_started_event_id:
        ex.wft_started_event_id = m.append(
            EventType.WORKFLOW_TASK_STARTED,
            {
                "scheduled_event_id": ex.wft_scheduled_event_id,
                "identity": "history-service",
                "request_id": str(uuid.uuid4()),
                "history_size_bytes": ex.history_size_bytes,
            },
        )
    m.append(
        EventType.WORKFLOW_TASK_FAILED,
        {
            "scheduled_event_id": ex.wft_scheduled_event_id,
            "started_event_id": ex.wft_started_event_id,
            "cause": RESET_CAUSE,
            "failure": {"message": reason, "source": "server", "reset_workflow_failure_info": {}},
            "identity": "history-service",
            "base_run_id": str(plan.base.run_id),
            "new_run_id": str(ex.run_id),
            "fork_event_version": 0,
        },
    )
    m.clear_workflow_task()
    ex.wft_attempt = 1


def _restore_pending(m: ExecutionMutation, state: ReplayedState) -> None:
    """Activities pending at the point run again from now; timers keep their deadlines."""
    for scheduled, attrs in sorted(state.activities.items()):
        restore_activity_txn(m, scheduled, attrs)
    for scheduled, requested in state.activity_cancel_requests.items():
        PendingActivity.objects.filter(run=m.execution, scheduled_event_id=scheduled).update(
            cancel_requested_event_id=requested
        )
    for timer in state.timers.values():
        m.add_timer(
            TimerKind.USER_TIMER,
            timer.fire_at,
            timer_id=timer.timer_id,
            scheduled_event_id=timer.started_event_id,
        )


def _reapply_signals(m: ExecutionMutation, plan: ResetPlan, identity: str) -> None:
    for _, attrs in plan.signals:
        m.execution.signal_count += 1
        m.append(
            EventType.WORKFLOW_EXECUTION_SIGNALED,
            {
                "signal_name": attrs.get("signal_name", ""),
                "input": attrs.get("input") or [],
                "identity": attrs.get("identity") or identity,
                "request_id": attrs.get("request_id") or "",
            },
        )
        if attrs.get("request_id"):
            SignalRequest.objects.get_or_create(run=m.execution, request_id=attrs["request_id"])


def _restore_children(m: ExecutionMutation, state: ReplayedState) -> None:
    """Children in flight at the point stay this run's; requests without an outcome go again."""
    for child in sorted(state.children.values(), key=lambda c: c.initiated_event_id):
        started = (child.started_run_id, child.started_event_id) if child.started_run_id else None
        restore_child(m, child.initiated_event_id, child.request, started)
    for request in sorted(state.external_requests.values(), key=lambda r: r.initiated_event_id):
        restore_external_request(m, request.initiated_event_id, request.kind, request.attributes)


def _report_children_closed_meanwhile(m: ExecutionMutation) -> None:
    """A child taken over that has closed since (its report went to the base run) closes here now."""
    started = PendingChildExecution.objects.filter(run=m.execution, started_run_id__isnull=False)
    for child in started.order_by("initiated_event_id"):
        closed = _closed_chain_end(m.namespace, child)
        if closed is not None:
            m.add_outside_event(*child_close_event(closed, child, m.namespace.name))
            child.delete()


def _closed_chain_end(namespace: Namespace, child: PendingChildExecution) -> WorkflowExecution | None:
    """The run that closed the child's chain, or None while the chain is open."""
    assert child.started_run_id is not None
    chain = WorkflowExecution.objects.filter(
        namespace=namespace, workflow_id=child.workflow_id, first_run_id=child.started_run_id
    )
    if chain.filter(status=ExecutionStatus.RUNNING).exists():
        return None
    ends = chain.filter(new_run_id__isnull=True, reset_run_id__isnull=True)
    return ends.exclude(status=ExecutionStatus.RUNNING).order_by("-close_time").first()
