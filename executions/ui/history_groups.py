"""The history's grouped mode: an activity, a timer or a child is one line with its outcome.

A group's line stands at its first event (``ActivityTaskScheduled``, ``TimerStarted``,
``StartChildWorkflowExecutionInitiated``) and says how it ended ("failed on attempt 3:
card declined", "fired after 5 minutes"); its later events are not lines of their own but
are listed in the line's JSON. The page reads its anchors (the history without the later
events) as one keyset page, and the later events of those anchors in one more read, found
by the id they name (``scheduled_event_id``, ``initiated_event_id`` or a timer's
``started_event_id``), so a long history costs two reads a page.
"""

from __future__ import annotations

from typing import Any

from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce

from executions.ui import panels, run_card, words
from history.models import HistoryEvent, WorkflowExecution
from history.vocabulary import EventType

E = EventType
ANCHORS = {
    E.ACTIVITY_TASK_SCHEDULED: "Activity",
    E.TIMER_STARTED: "Timer",
    E.START_CHILD_WORKFLOW_EXECUTION_INITIATED: "Child workflow",
}
OUTCOMES = {
    E.ACTIVITY_TASK_STARTED: "running",
    E.ACTIVITY_TASK_COMPLETED: "completed",
    E.ACTIVITY_TASK_FAILED: "failed",
    E.ACTIVITY_TASK_TIMED_OUT: "timed out",
    E.ACTIVITY_TASK_CANCEL_REQUESTED: "cancel requested",
    E.ACTIVITY_TASK_CANCELED: "canceled",
    E.TIMER_FIRED: "fired",
    E.TIMER_CANCELED: "canceled",
    E.START_CHILD_WORKFLOW_EXECUTION_FAILED: "could not start",
    E.CHILD_WORKFLOW_EXECUTION_STARTED: "running",
    E.CHILD_WORKFLOW_EXECUTION_COMPLETED: "completed",
    E.CHILD_WORKFLOW_EXECUTION_FAILED: "failed",
    E.CHILD_WORKFLOW_EXECUTION_CANCELED: "canceled",
    E.CHILD_WORKFLOW_EXECUTION_TIMED_OUT: "timed out",
    E.CHILD_WORKFLOW_EXECUTION_TERMINATED: "terminated",
}
# The events folded into their group's line: never a line of their own in this mode.
FOLDED_TYPES = [t.value for t in OUTCOMES]


def group_lines(ex: WorkflowExecution, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``lines`` (a page of anchors) with each group's later events folded into its line."""
    anchors = {line["event_id"]: line for line in lines if line["event_type"] in ANCHORS}
    members = _later_events(ex, list(anchors))
    for anchor_id, line in anchors.items():
        later = members.get(anchor_id, [])
        line["group"] = f"{ANCHORS[line['event_type']]} {_group_name(line)}"
        line["summary"] = _outcome(line, later)
        line["member_ids"] = [e["event_id"] for e in later]
        everything = [line, *later]
        line["pretty"] = panels.pretty(
            [
                {
                    "event_id": e["event_id"],
                    "event_type": e["event_type"],
                    "attributes": panels.readable(e["attributes"]),
                }
                for e in everything
            ]
        )
    return lines


def _later_events(ex: WorkflowExecution, anchor_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    if not anchor_ids:
        return {}
    rows = (
        HistoryEvent.objects.filter(run=ex, event_type__in=FOLDED_TYPES)
        .annotate(
            anchor=Coalesce(
                KT("attributes__scheduled_event_id"),
                KT("attributes__initiated_event_id"),
                KT("attributes__started_event_id"),
            )
        )
        .filter(anchor__in=[str(i) for i in anchor_ids])
        .order_by("event_id")
        .values("event_id", "event_type", "event_time", "attributes", "anchor")
    )
    later: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        later.setdefault(int(row["anchor"]), []).append(row)
    return later


def _group_name(line: dict[str, Any]) -> str:
    a = line["attributes"] or {}
    if line["event_type"] == E.ACTIVITY_TASK_SCHEDULED:
        kind = a.get("activity_type") or {}
        return f"{kind.get('name', '') if isinstance(kind, dict) else kind} ({a.get('activity_id', '')})"
    if line["event_type"] == E.TIMER_STARTED:
        return str(a.get("timer_id", ""))
    return str(a.get("workflow_id", ""))


def _outcome(line: dict[str, Any], later: list[dict[str, Any]]) -> str:
    """How the group ended (or where it stands), in words."""
    if not later:
        return "timer pending" if line["event_type"] == E.TIMER_STARTED else "scheduled, not started"
    last = later[-1]
    a = last["attributes"] or {}
    outcome = OUTCOMES[last["event_type"]]
    started = next((e for e in later if e["event_type"] == E.ACTIVITY_TASK_STARTED), None)
    parts = [outcome]
    if started is not None:
        parts.append(f"on attempt {(started['attributes'] or {}).get('attempt', 1)}")
    if last["event_type"] == E.TIMER_FIRED:
        seconds = (line["attributes"] or {}).get("start_to_fire_timeout")
        parts.append(f"after {words.duration_words(float(seconds))}" if seconds else "")
    text = " ".join(p for p in parts if p)
    failure = run_card.root_message(a.get("failure")) if a.get("failure") else ""
    return f"{text}: {failure}" if failure else text
