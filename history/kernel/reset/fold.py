"""The fold: a run's mutable state rebuilt from a prefix of its history.

The one place the server derives state from history (temporal-semantics §11): a reset's
new run gets the pending activities, timers, children, outside requests, search
attributes and counters that held just before the reset point, because the base run's
rows describe its present, not the point. :func:`replay_state` folds each event's few
replayed attributes (:data:`REPLAYED_KEYS`) into a :class:`ReplayedState`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from history.models import (
    ExternalRequestKind,
    HistoryEvent,
    WorkflowExecution,
)
from history.vocabulary import EventType
from namespaces.search_attributes import merge_search_attributes

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
            "WHERE run_id = %s AND shard_id = %s AND event_id < %s ORDER BY event_id",
            [run.run_id, run.shard_id, before_event_id],
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
        HistoryEvent.objects.filter(run=run, shard_id=run.shard_id, event_id__in=pending).values_list(
            "event_id", "attributes"
        )
    )
    for event_id in state.activities:
        state.activities[event_id] = full[event_id]
    for event_id, child in state.children.items():
        child.request = full[event_id]
    for event_id, request in state.external_requests.items():
        request.attributes = full[event_id]
