"""The run page's history: one line per event, filtered by category, either way round.

Each event is a line (id, time, type and the attributes that matter: the activity and its
attempt, the timer's duration, the signal's name, the root failure message), with its
JSON folded under it. An activity's outcome names the activity it closes, read from its
``ActivityTaskScheduled`` (on the page, or in one projected read of the few that are not),
so a line reads alone. A page is one indexed read of ``PAGE_SIZE`` events however long the
history is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models.fields.json import KT
from django.http import QueryDict

from executions import selectors
from executions.ui import history_groups, panels, run_card, words
from history.models import HistoryEvent, WorkflowExecution
from history.vocabulary import EventType

PAGE_SIZE = panels.EVENTS_PAGE_SIZE
SHORT_VALUE_CHARS = 80
CATEGORIES = {
    "workflow": "Workflow",
    "task": "Workflow tasks",
    "activity": "Activities",
    "timer": "Timers",
    "signal": "Signals",
    "child": "Child workflows",
    "other": "Markers and other",
}
SIGNAL_TYPES = frozenset(
    {
        EventType.WORKFLOW_EXECUTION_SIGNALED,
        EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
        EventType.EXTERNAL_WORKFLOW_EXECUTION_SIGNALED,
    }
)


def category(event_type: str) -> str:
    """The filter category an event type belongs to."""
    if event_type in SIGNAL_TYPES:
        return "signal"
    for prefix, name in (
        ("WorkflowTask", "task"),
        ("WorkflowExecution", "workflow"),
        ("ActivityTask", "activity"),
        ("Timer", "timer"),
        ("ChildWorkflowExecution", "child"),
        ("StartChildWorkflowExecution", "child"),
    ):
        if event_type.startswith(prefix):
            return name
    return "other"


TYPES_BY_CATEGORY = {name: [t.value for t in EventType if category(t) == name] for name in CATEGORIES}


@dataclass(frozen=True)
class HistoryRequest:
    """Which events the page shows: a category (or all), the order and the page's cursor."""

    category: str
    newest_first: bool
    cursor: int  # oldest first: events after it; newest first: events before it (0: the end)
    grouped: bool = False  # an activity, timer or child as one line (``history_groups``)

    @classmethod
    def of(cls, params: QueryDict) -> HistoryRequest:
        wanted = params.get("category", "")
        newest_first = params.get("order") == "newest"
        try:
            cursor = max(0, int(params.get("before" if newest_first else "after", "0")))
        except ValueError:
            cursor = 0
        grouped = params.get("group") == "1"
        return cls(wanted if wanted in CATEGORIES else "", newest_first, cursor, grouped)

    @property
    def default(self) -> bool:
        """The plain oldest-first view of every event, where live mode appends new events."""
        return not self.category and not self.newest_first and not self.grouped

    def params(self, **changes: str | int) -> str:
        """The query string of this view (with ``changes``), for links and the next page."""
        values: dict[str, str | int] = {
            "category": self.category,
            "order": "newest" if self.newest_first else "",
            "group": "1" if self.grouped else "",
        }
        values.update(changes)
        query = QueryDict(mutable=True)
        for key, value in values.items():
            if value not in ("", 0):
                query[key] = str(value)
        return query.urlencode()


def page(ex: WorkflowExecution, wanted: HistoryRequest) -> tuple[list[dict[str, Any]], str]:
    """One page of events as lines, and the query string of the next page ("" at the end)."""
    rows = HistoryEvent.objects.filter(run=ex)
    if wanted.category:
        rows = rows.filter(event_type__in=TYPES_BY_CATEGORY[wanted.category])
    if wanted.grouped:
        rows = rows.exclude(event_type__in=history_groups.FOLDED_TYPES)
    if wanted.newest_first:
        rows = rows.filter(event_id__lt=wanted.cursor) if wanted.cursor else rows
        rows = rows.order_by("-event_id")
    else:
        rows = rows.filter(event_id__gt=wanted.cursor).order_by("event_id")
    events = list(rows.values("event_id", "event_type", "event_time", "attributes")[: PAGE_SIZE + 1])
    more = len(events) > PAGE_SIZE
    events = events[:PAGE_SIZE]
    lines = with_summaries(ex, [_event(e) for e in events])
    if wanted.grouped:
        lines = history_groups.group_lines(ex, lines)
    if not more:
        return lines, ""
    last = events[-1]["event_id"]
    return lines, wanted.params(**({"before": last} if wanted.newest_first else {"after": last}))


def rows_after(ex: WorkflowExecution, after: int) -> tuple[list[dict[str, Any]], int | None]:
    """The events after ``after`` as lines (live mode's read), and the next cursor."""
    events, more = selectors.history_page(ex, after_event_id=after, page_size=PAGE_SIZE)
    return with_summaries(ex, events), more


def _event(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "event_id": row["event_id"],
        "event_type": row["event_type"],
        "event_time": row["event_time"].isoformat(),
        "attributes": row["attributes"],
    }


def with_summaries(ex: WorkflowExecution, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with their category, one-line summary and pretty JSON added."""
    names = _activity_names(ex, events)
    for event in events:
        event["category"] = category(event["event_type"])
        event["summary"] = summary(event["event_type"], event["attributes"] or {}, names)
        event["pretty"] = panels.pretty(panels.readable(event["attributes"]))
    return events


def _activity_names(ex: WorkflowExecution, events: list[dict[str, Any]]) -> dict[int, str]:
    """ "Charge (a1)" by scheduled event id, for every activity the page's events name."""
    names = {
        e["event_id"]: _activity_label(e["attributes"])
        for e in events
        if e["event_type"] == EventType.ACTIVITY_TASK_SCHEDULED
    }
    missing = (
        {
            int(e["attributes"].get("scheduled_event_id") or 0)
            for e in events
            if e["event_type"].startswith("ActivityTask")
        }
        - set(names)
        - {0}
    )
    if missing:
        rows = (
            HistoryEvent.objects.filter(run=ex, event_id__in=missing)
            .annotate(name=KT("attributes__activity_type__name"), activity=KT("attributes__activity_id"))
            .values_list("event_id", "name", "activity")
        )
        names.update({event_id: f"{name} ({activity})" for event_id, name, activity in rows})
    return names


def _activity_label(attributes: dict[str, Any]) -> str:
    kind = attributes.get("activity_type") or {}
    return f"{kind.get('name', '') if isinstance(kind, dict) else kind} ({attributes.get('activity_id', '')})"


def short(value: Any) -> str:
    """A payload or value on one line, cut to ``SHORT_VALUE_CHARS``."""
    text = json.dumps(panels.readable(value), sort_keys=True, default=str)
    return text if len(text) <= SHORT_VALUE_CHARS else text[: SHORT_VALUE_CHARS - 1] + "…"


def _name(value: Any) -> str:
    return str(value.get("name", "")) if isinstance(value, dict) else str(value or "")


def _failure(attributes: dict[str, Any]) -> str:
    failure = attributes.get("failure")
    return run_card.root_message(failure) if failure else ""


def summary(event_type: str, a: dict[str, Any], activities: dict[int, str]) -> str:
    """The attributes of an event that matter, on one line."""
    if event_type.startswith("ActivityTask"):
        return _activity_summary(event_type, a, activities)
    handler = SUMMARIES.get(event_type)
    if handler is not None:
        return " · ".join(part for part in handler(a) if part)
    scalars = [f"{k}={v}" for k, v in a.items() if isinstance(v, (str, int, float)) and v not in ("", None)]
    return ", ".join(scalars[:3])


def _activity_summary(event_type: str, a: dict[str, Any], activities: dict[int, str]) -> str:
    if event_type == EventType.ACTIVITY_TASK_SCHEDULED:
        return f"{_activity_label(a)} on {_name(a.get('task_queue'))}"
    parts = [activities.get(int(a.get("scheduled_event_id") or 0), "")]
    if event_type == EventType.ACTIVITY_TASK_STARTED:
        parts += [f"attempt {a.get('attempt', 1)}", _by(a)]
    elif event_type == EventType.ACTIVITY_TASK_COMPLETED:
        parts.append(f"result {short(a.get('result'))}")
    elif event_type == EventType.ACTIVITY_TASK_FAILED:
        parts.append(_failure(a))
    elif event_type == EventType.ACTIVITY_TASK_TIMED_OUT:
        parts.append(_failure(a) or str(a.get("timeout_type", "")))
    return " · ".join(part for part in parts if part)


def _by(a: dict[str, Any]) -> str:
    return f"by {a['identity']}" if a.get("identity") else ""


def _attempt(a: dict[str, Any]) -> str:
    return f"attempt {a['attempt']}" if int(a.get("attempt") or 1) > 1 else ""


def _timer_duration(a: dict[str, Any]) -> str:
    seconds = a.get("start_to_fire_timeout")
    return words.duration_words(float(seconds)) if seconds else ""


def _child(a: dict[str, Any]) -> str:
    execution = a.get("workflow_execution") or {}
    return str(execution.get("workflow_id") or a.get("workflow_id") or "")


def _update_accepted(request: dict[str, Any]) -> tuple[str, ...]:
    given, meta = request.get("input") or {}, request.get("meta") or {}
    return (
        f"update {given.get('name', '')} ({meta.get('update_id', '')})",
        f"args {short(given.get('args'))}" if given.get("args") else "",
        _by(meta),
    )


def _update_outcome(outcome: dict[str, Any]) -> str:
    return _failure(outcome) if outcome.get("failure") else f"result {short(outcome.get('success'))}"


Summarise = Callable[[dict[str, Any]], tuple[str, ...]]
SUMMARIES: dict[str, Summarise] = {
    EventType.WORKFLOW_EXECUTION_STARTED: lambda a: (
        f"{_name(a.get('workflow_type'))} on {_name(a.get('task_queue'))}",
        f"input {short(a.get('input'))}" if a.get("input") else "",
        _attempt(a),
    ),
    EventType.WORKFLOW_EXECUTION_COMPLETED: lambda a: (f"result {short(a.get('result'))}",),
    EventType.WORKFLOW_EXECUTION_FAILED: lambda a: (_failure(a),),
    EventType.WORKFLOW_EXECUTION_TIMED_OUT: lambda a: ("the run's timeout passed",),
    EventType.WORKFLOW_EXECUTION_TERMINATED: lambda a: (str(a.get("reason") or ""), _by(a)),
    EventType.WORKFLOW_EXECUTION_CANCELED: lambda a: ("canceled",),
    EventType.WORKFLOW_EXECUTION_CANCEL_REQUESTED: lambda a: (str(a.get("cause") or ""), _by(a)),
    EventType.WORKFLOW_EXECUTION_CONTINUED_AS_NEW: lambda a: (
        f"new run {a.get('new_execution_run_id', '')}",
    ),
    EventType.WORKFLOW_EXECUTION_SIGNALED: lambda a: (
        f"signal {a.get('signal_name', '')}",
        f"input {short(a.get('input'))}" if a.get("input") else "",
        _by(a),
    ),
    EventType.WORKFLOW_EXECUTION_UPDATE_ACCEPTED: lambda a: _update_accepted(a.get("accepted_request") or {}),
    EventType.WORKFLOW_EXECUTION_UPDATE_COMPLETED: lambda a: (
        f"update {(a.get('meta') or {}).get('update_id', '')}",
        _update_outcome(a.get("outcome") or {}),
    ),
    EventType.WORKFLOW_TASK_SCHEDULED: lambda a: (f"on {_name(a.get('task_queue'))}", _attempt(a)),
    EventType.WORKFLOW_TASK_STARTED: lambda a: (_by(a),),
    EventType.WORKFLOW_TASK_COMPLETED: lambda a: (_by(a),),
    EventType.WORKFLOW_TASK_FAILED: lambda a: (run_card.cause_words(str(a.get("cause") or "")), _failure(a)),
    EventType.WORKFLOW_TASK_TIMED_OUT: lambda a: (str(a.get("timeout_type") or ""),),
    EventType.TIMER_STARTED: lambda a: (f"timer {a.get('timer_id', '')}", _timer_duration(a)),
    EventType.TIMER_FIRED: lambda a: (f"timer {a.get('timer_id', '')}",),
    EventType.TIMER_CANCELED: lambda a: (f"timer {a.get('timer_id', '')}",),
    EventType.MARKER_RECORDED: lambda a: (str(a.get("marker_name") or ""),),
    EventType.UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: lambda a: (
        ", ".join(
            sorted(
                (a.get("search_attributes") or {}).get("indexed_fields") or a.get("search_attributes") or {}
            )
        ),
    ),
    EventType.START_CHILD_WORKFLOW_EXECUTION_INITIATED: lambda a: (
        f"{a.get('workflow_id', '')} ({_name(a.get('workflow_type'))})",
    ),
    EventType.CHILD_WORKFLOW_EXECUTION_STARTED: lambda a: (_child(a),),
    EventType.CHILD_WORKFLOW_EXECUTION_COMPLETED: lambda a: (_child(a), f"result {short(a.get('result'))}"),
    EventType.CHILD_WORKFLOW_EXECUTION_FAILED: lambda a: (_child(a), _failure(a)),
    EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: lambda a: (
        f"signal {a.get('signal_name', '')} to {_child(a)}",
    ),
}
