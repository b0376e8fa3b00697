"""The execution page's timeline: a run's history drawn as bars over time.

One lane per activity, timer and child workflow, one for the run itself, one for all its
workflow tasks, and one each for signals and markers (drawn as points). The lanes come
from a single query that reads each event's id, type, time and the few attributes that
link events together (``scheduled_event_id``, ``started_event_id``, ``initiated_event_id``)
or name them, never the payloads, so a 5,000-event run stays cheap to draw.

Temporal records only an activity's last attempt in history: a closed activity's attempt
and the failure of the attempt before it are on its ``ActivityTaskStarted`` event (written
when the attempt closes), and a running activity's are on its pending row, which the
execution page already reads through ``execution_describe``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from executions.ui.timeline_events import read_events
from executions.ui.timeline_scale import Scale, idle_folds, placed_folds, ticks
from executions.ui.words import compact_duration
from history.models import WorkflowExecution
from history.vocabulary import CLOSE_EVENTS

# Outcomes double as CSS class suffixes (``tl-completed`` ...) and as the words the
# accessible names use, so colour is never the only signal.
RUNNING, COMPLETED, FAILED, TIMED_OUT, CANCELED, TERMINATED = (
    "running",
    "completed",
    "failed",
    "timed-out",
    "canceled",
    "terminated",
)
OUTCOME_WORDS = {
    RUNNING: "Running",
    COMPLETED: "Completed",
    FAILED: "Failed",
    TIMED_OUT: "Timed out",
    CANCELED: "Canceled",
    TERMINATED: "Terminated",
}
CLOSE_OUTCOMES = {
    "Completed": COMPLETED,
    "Failed": FAILED,
    "TimedOut": TIMED_OUT,
    "Canceled": CANCELED,
    "Terminated": TERMINATED,
    "ContinuedAsNew": COMPLETED,
}
# Lanes for activities, timers and children drawn at most; see _worth_drawing.
MAX_SPAN_LANES = 200


@dataclass
class Span:
    """A stretch of time one thing took: an activity, a timer, a child, a workflow task."""

    kind: str
    name: str
    start: datetime
    event_ids: list[int]
    end: datetime | None = None
    outcome: str = RUNNING
    notes: list[str] = field(default_factory=list)
    attempt: int = 1
    max_attempts: int = 0
    child_run: str = ""


@dataclass
class Point:
    kind: str
    name: str
    time: datetime
    event_id: int


@dataclass
class Lane:
    """One row of the timeline; ``spans`` and ``points`` are already placed on the track."""

    kind: str
    title: str
    subtitle: str = ""
    bars: list[dict[str, Any]] = field(default_factory=list)
    points: list[dict[str, Any]] = field(default_factory=list)
    link: str = ""
    attempt: int = 1


@dataclass
class Timeline:
    lanes: list[Lane]
    start: datetime
    end: datetime
    ticks: list[dict[str, str]]
    event_count: int
    pending_summary: list[str]
    # Plainly completed activities, timers and children left undrawn (see MAX_SPAN_LANES).
    folded_lanes: int = 0
    # Idle stretches drawn narrow, each placed on the axis: {"left", "width", "text", "words"}.
    idle_folds: list[dict[str, str]] = field(default_factory=list)

    @property
    def lanes_html(self) -> SafeString:
        """The lanes' markup, written here rather than in a template loop.

        A 5,000-event run has well over a thousand lanes; Django's template engine spent
        about 150 ms on them on this machine, plain string building a small part of that.
        """
        return mark_safe("".join(_lane_html(lane) for lane in self.lanes))  # _lane_html escapes every part


def _link(css: str, href: str, style: str, label: str) -> str:
    text = escape(label)
    return f'<a class="{css}" href="{escape(href)}" style="{style}" title="{text}" aria-label="{text}"></a>'


def _lane_html(lane: Lane) -> str:
    title = str(escape(lane.title))
    if lane.link:
        title = f'<a href="{escape(lane.link)}">{title}</a>'
    if lane.subtitle:
        title += f' <small class="muted">{escape(lane.subtitle)}</small>'
    if lane.attempt > 1:
        title += f' <small class="tl-attempts">attempt {lane.attempt}</small>'
    marks = [
        _link(
            f"tl-bar tl-{b['outcome']}{' tl-retried' if b['retried'] else ''}",
            b["href"],
            f"left:{b['left']}%;width:{b['width']}%",
            b["label"],
        )
        for b in lane.bars
    ]
    marks += [_link("tl-point", p["href"], f"left:{p['left']}%", p["label"]) for p in lane.points]
    return (
        f'<li class="tl-lane tl-kind-{lane.kind}"><span class="tl-title">{title}</span>'
        f'<span class="tl-track">{"".join(marks)}</span></li>'
    )


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


class _Builder:
    """Walks the events once, opening spans on their first event and closing them by link."""

    def __init__(self, ex: WorkflowExecution, pending: dict[int, dict[str, Any]]) -> None:
        self.ex = ex
        self.pending = pending
        self.spans: dict[tuple[str, int], Span] = {}
        self.workflow_tasks: list[Span] = []
        self.points: list[Point] = []
        self.run: Span | None = None

    def feed(self, e: dict[str, Any]) -> None:
        kind = e["event_type"]
        handler = HANDLERS.get(kind)
        if handler is not None:
            handler(self, e)
        elif kind in CLOSE_EVENTS and self.run is not None:
            self._close(self.run, e, CLOSE_OUTCOMES[kind.removeprefix("WorkflowExecution")])

    # -- helpers ----------------------------------------------------------------------
    def _open(self, key: tuple[str, int], span: Span) -> None:
        self.spans[key] = span

    def _linked(self, kind: str, e: dict[str, Any], link: str) -> Span | None:
        span = self.spans.get((kind, _int(e[link])))
        if span is not None:
            span.event_ids.append(e["event_id"])
        return span

    def _close(self, span: Span, e: dict[str, Any], outcome: str) -> None:
        span.end = e["event_time"]
        span.outcome = outcome
        if e["event_id"] not in span.event_ids:
            span.event_ids.append(e["event_id"])
        reason = e["failure"] or e["timeout_type"] or e["cause"]
        if reason and outcome != COMPLETED:
            span.notes.append(f"{OUTCOME_WORDS[outcome]}: {reason}")

    # -- the run and its workflow tasks -----------------------------------------------
    def run_started(self, e: dict[str, Any]) -> None:
        self.run = Span("workflow", self.ex.workflow_type, e["event_time"], [e["event_id"]])

    def wft_scheduled(self, e: dict[str, Any]) -> None:
        span = Span("workflow-task", "Workflow task", e["event_time"], [e["event_id"]])
        self._open(("wft", e["event_id"]), span)
        self.workflow_tasks.append(span)

    def wft_started(self, e: dict[str, Any]) -> None:
        span = self._linked("wft", e, "scheduled")
        if span is not None:
            span.attempt = max(span.attempt, _int(e["attempt"]) or 1)

    def wft_closed(self, e: dict[str, Any]) -> None:
        span = self.spans.get(("wft", _int(e["scheduled"])))
        if span is not None:
            outcome = {"WorkflowTaskCompleted": COMPLETED, "WorkflowTaskFailed": FAILED}
            self._close(span, e, outcome.get(e["event_type"], TIMED_OUT))

    # -- activities ---------------------------------------------------------------------
    def activity_scheduled(self, e: dict[str, Any]) -> None:
        span = Span("activity", e["activity_type"] or "activity", e["event_time"], [e["event_id"]])
        span.notes.append(f"activity id {e['activity_id']}")
        span.max_attempts = _int(e["max_attempts"])
        self._open(("activity", e["event_id"]), span)

    def activity_started(self, e: dict[str, Any]) -> None:
        span = self._linked("activity", e, "scheduled")
        if span is None:
            return
        span.attempt = _int(e["attempt"]) or 1
        if e["last_failure"]:
            span.notes.append(f"attempt {span.attempt - 1} failed: {e['last_failure']}")

    def activity_cancel_requested(self, e: dict[str, Any]) -> None:
        span = self._linked("activity", e, "scheduled")
        if span is not None:
            span.notes.append("cancel requested")

    def activity_closed(self, e: dict[str, Any]) -> None:
        span = self.spans.get(("activity", _int(e["scheduled"])))
        if span is not None:
            self._close(span, e, _outcome_of(e["event_type"].removeprefix("ActivityTask")))

    # -- timers ---------------------------------------------------------------------------
    def timer_started(self, e: dict[str, Any]) -> None:
        self._open(
            ("timer", e["event_id"]),
            Span("timer", e["timer_id"] or "timer", e["event_time"], [e["event_id"]]),
        )

    def timer_closed(self, e: dict[str, Any]) -> None:
        span = self.spans.get(("timer", _int(e["started"])))
        if span is not None:
            self._close(span, e, COMPLETED if e["event_type"] == "TimerFired" else CANCELED)

    # -- children ---------------------------------------------------------------------------
    def child_initiated(self, e: dict[str, Any]) -> None:
        span = Span("child", e["child_id"] or "child", e["event_time"], [e["event_id"]])
        span.notes.append(f"type {e['workflow_type']}")
        self._open(("child", e["event_id"]), span)

    def child_started(self, e: dict[str, Any]) -> None:
        span = self._linked("child", e, "initiated")
        if span is not None:
            span.child_run = e["child_run"] or ""

    def child_closed(self, e: dict[str, Any]) -> None:
        span = self.spans.get(("child", _int(e["initiated"])))
        if span is None:
            return
        if e["event_type"] == "StartChildWorkflowExecutionFailed":
            self._close(span, e, FAILED)
        else:
            self._close(span, e, _outcome_of(e["event_type"].removeprefix("ChildWorkflowExecution")))

    # -- points -------------------------------------------------------------------------------
    def signaled(self, e: dict[str, Any]) -> None:
        self.points.append(Point("signal", e["signal_name"] or "signal", e["event_time"], e["event_id"]))

    def marker(self, e: dict[str, Any]) -> None:
        self.points.append(Point("marker", e["marker_name"] or "marker", e["event_time"], e["event_id"]))


def _outcome_of(suffix: str) -> str:
    return CLOSE_OUTCOMES.get(suffix, FAILED)


HANDLERS = {
    "WorkflowExecutionStarted": _Builder.run_started,
    "WorkflowTaskScheduled": _Builder.wft_scheduled,
    "WorkflowTaskStarted": _Builder.wft_started,
    "WorkflowTaskCompleted": _Builder.wft_closed,
    "WorkflowTaskFailed": _Builder.wft_closed,
    "WorkflowTaskTimedOut": _Builder.wft_closed,
    "ActivityTaskScheduled": _Builder.activity_scheduled,
    "ActivityTaskStarted": _Builder.activity_started,
    "ActivityTaskCancelRequested": _Builder.activity_cancel_requested,
    "ActivityTaskCompleted": _Builder.activity_closed,
    "ActivityTaskFailed": _Builder.activity_closed,
    "ActivityTaskTimedOut": _Builder.activity_closed,
    "ActivityTaskCanceled": _Builder.activity_closed,
    "TimerStarted": _Builder.timer_started,
    "TimerFired": _Builder.timer_closed,
    "TimerCanceled": _Builder.timer_closed,
    "StartChildWorkflowExecutionInitiated": _Builder.child_initiated,
    "ChildWorkflowExecutionStarted": _Builder.child_started,
    "StartChildWorkflowExecutionFailed": _Builder.child_closed,
    "ChildWorkflowExecutionCompleted": _Builder.child_closed,
    "ChildWorkflowExecutionFailed": _Builder.child_closed,
    "ChildWorkflowExecutionCanceled": _Builder.child_closed,
    "ChildWorkflowExecutionTimedOut": _Builder.child_closed,
    "ChildWorkflowExecutionTerminated": _Builder.child_closed,
    "WorkflowExecutionSignaled": _Builder.signaled,
    "MarkerRecorded": _Builder.marker,
}


def _apply_pending(span: Span, row: dict[str, Any]) -> None:
    """A running activity's attempt and last failure come from its pending row."""
    span.attempt = row["attempt"]
    failure = row.get("last_failure") or {}
    if failure:
        message = failure.get("message", "") if isinstance(failure, dict) else str(failure)
        span.notes.append(f"attempt {span.attempt - 1} failed: {message}")
    if row.get("next_attempt_schedule_time") and span.attempt > 1:
        span.notes.append(f"next attempt at {row['next_attempt_schedule_time']}")
    elif row.get("state") == "STARTED":
        span.notes.append("attempt started")


class _Anchors:
    """Links to an event's row: on this page of the table, or on the page that shows it."""

    def __init__(self, first_shown: int, last_shown: int, page_size: int) -> None:
        self.first, self.last, self.page_size = first_shown, last_shown, page_size

    def href(self, event_id: int) -> str:
        if self.first <= event_id <= self.last:
            return f"#event-{event_id}"
        after = (event_id - 1) // self.page_size * self.page_size
        return f"?after={after}#event-{event_id}"


def _bar(span: Span, scale: Scale, anchors: _Anchors, now: datetime) -> dict[str, Any]:
    end = span.end or now
    left, width = scale.place(span.start, end)
    outcome = span.outcome
    words = OUTCOME_WORDS[outcome]
    attempts = ""
    if span.kind == "activity" and span.attempt > 1:
        limit = f" of {span.max_attempts}" if span.max_attempts else ""
        attempts = f", attempt {span.attempt}{limit}"
    ids = ", ".join(str(i) for i in span.event_ids)
    details = "; ".join(span.notes)
    took = compact_duration((end - span.start).total_seconds())
    label = f"{span.name}: {words}{attempts}, {took} (events {ids})"
    return {
        "left": left,
        "width": width,
        "outcome": outcome,
        "retried": span.attempt > 1,
        "href": anchors.href(span.event_ids[0]),
        "label": f"{label}. {details}" if details else label,
        "event_ids": span.event_ids,
    }


def _point(p: Point, scale: Scale, anchors: _Anchors) -> dict[str, Any]:
    when = p.time.strftime("%H:%M:%S.%f")[:-3]
    return {
        "left": f"{scale.left(p.time):.3f}",
        "href": anchors.href(p.event_id),
        "label": f"{p.kind.capitalize()} {p.name} at {when} (event {p.event_id})",
    }


def _span_lane(span: Span, scale: Scale, anchors: _Anchors, now: datetime, namespace: str) -> Lane:
    titles = {"activity": "Activity", "timer": "Timer", "child": "Child"}
    lane = Lane(span.kind, span.name, titles.get(span.kind, ""), [_bar(span, scale, anchors, now)])
    lane.attempt = span.attempt if span.kind == "activity" else 1
    if span.kind == "child" and span.child_run:
        lane.link = reverse("ui-execution", args=[namespace, span.name, span.child_run])
    return lane


def _pending_summary(pending: list[dict[str, Any]]) -> list[str]:
    lines = []
    for row in pending:
        line = (
            f"{row['activity_type']} ({row['activity_id']}): {row['state'].lower()}, attempt {row['attempt']}"
        )
        failure = row.get("last_failure") or {}
        if isinstance(failure, dict) and failure.get("message"):
            line += f"; last failure: {failure['message']}"
        lines.append(line)
    return lines


def shown(events: list[dict[str, Any]]) -> tuple[int, int]:
    """The (first, last) event id of a page of the event table ((1, 0) for an empty page)."""
    return (events[0]["event_id"], events[-1]["event_id"]) if events else (1, 0)


def build(
    ex: WorkflowExecution,
    pending_activities: list[dict[str, Any]],
    *,
    namespace: str,
    shown: tuple[int, int],
    page_size: int,
) -> Timeline:
    """The run's timeline; ``shown`` is the (first, last) event id the table on the page shows.

    ``pending_activities`` is ``execution_describe``'s list, so the page reads the pending
    rows once for both the table and the timeline.
    """
    events = read_events(ex)
    builder = _Builder(ex, {row["scheduled_event_id"]: row for row in pending_activities})
    for event in events:
        builder.feed(event)
    now = ex.close_time or timezone.now()
    start = events[0]["event_time"] if events else ex.start_time
    end = max(now, start + timedelta(milliseconds=1))
    folds = idle_folds(events, end)
    scale = Scale(start, end, folds)
    anchors = _Anchors(shown[0], shown[1], page_size)
    for (kind, scheduled), span in builder.spans.items():
        if kind == "activity" and span.end is None and scheduled in builder.pending:
            _apply_pending(span, builder.pending[scheduled])
        if span.end is None and not ex.is_running:
            span.outcome = CANCELED
            span.notes.append("still open when the run closed")
    lanes, folded = _lanes(builder, scale, anchors, now, namespace)
    return Timeline(
        lanes=lanes,
        start=start,
        end=now,
        ticks=ticks(scale),
        event_count=len(events),
        pending_summary=_pending_summary(pending_activities),
        folded_lanes=folded,
        idle_folds=placed_folds(folds, scale),
    )


def _lanes(
    builder: _Builder, scale: Scale, anchors: _Anchors, now: datetime, namespace: str
) -> tuple[list[Lane], int]:
    """The lanes to draw, and how many activity, timer and child lanes were folded away."""
    lanes: list[Lane] = []
    if builder.run is not None:
        if builder.run.end is None and builder.ex.is_running is False:
            builder.run.outcome = CLOSE_OUTCOMES.get(builder.ex.status, COMPLETED)
        lanes.append(
            Lane(
                "workflow", "Workflow run", builder.ex.workflow_type, [_bar(builder.run, scale, anchors, now)]
            )
        )
    if builder.workflow_tasks:
        bars = [_bar(span, scale, anchors, now) for span in builder.workflow_tasks]
        lanes.append(Lane("workflow-task", "Workflow tasks", f"{len(bars)} tasks", bars))
    for kind, title in (("signal", "Signals"), ("marker", "Markers")):
        points = [_point(p, scale, anchors) for p in builder.points if p.kind == kind]
        if points:
            lanes.append(Lane(kind, title, f"{len(points)}", points=points))
    spans = [span for (kind, _), span in builder.spans.items() if kind != "wft"]
    shown, folded = _worth_drawing(spans)
    lanes.extend(_span_lane(span, scale, anchors, now, namespace) for span in shown)
    return lanes, folded


def _worth_drawing(spans: list[Span]) -> tuple[list[Span], int]:
    """At most MAX_SPAN_LANES spans, in order, and how many were folded away.

    A long run has thousands of lanes, and drawing them all costs the page its speed while
    the reader looks for the few that went wrong. So spans that did not simply complete on
    their first attempt (running, failed, retried, timed out, canceled) are drawn first,
    plainly completed ones fill the remaining lanes, the latest of each first, and the rest
    are counted (the event table still lists every event).
    """
    if len(spans) <= MAX_SPAN_LANES:
        return spans, 0
    notable = [s for s in spans if s.outcome != COMPLETED or s.attempt > 1]
    plain = [s for s in spans if s.outcome == COMPLETED and s.attempt <= 1]
    chosen = notable[-MAX_SPAN_LANES:]
    room = MAX_SPAN_LANES - len(chosen)
    keep = {id(s) for s in chosen} | {id(s) for s in (plain[-room:] if room else [])}
    return [s for s in spans if id(s) in keep], len(spans) - len(keep)
