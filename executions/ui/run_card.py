"""The run page's header card: what failed at the root, and what a running run waits on.

A failure reaches the run wrapped ("Activity task failed" around the activity's own
error, a child's failure around its cause), and the wrapper says nothing an operator can
act on. ``root_failure`` walks the cause chain to the innermost failure and names the
activity (or child) that raised it and its attempt. ``waiting_on`` says in words what an
open run is blocked by now, from the rows the page already reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models.fields.json import KT

from executions.ui import words
from executions.ui.panels import PendingTimer
from history.models import HistoryEvent, WorkflowExecution

MAX_CAUSE_DEPTH = 32
CAUSE_PREFIX = "WORKFLOW_TASK_FAILED_CAUSE_"
CAUSE_WORDS = {
    "NON_DETERMINISTIC_ERROR": "the workflow code no longer replays its history (a non-deterministic change)",
    "WORKFLOW_WORKER_UNHANDLED_FAILURE": "the workflow code raised an error the worker did not handle",
    "UNHANDLED_COMMAND": "new events arrived while the worker was deciding, so it must decide again",
    "BAD_BINARY": "the worker's build is marked bad",
    "RESET_WORKFLOW": "the run was reset",
}
FAILURE_KINDS = (
    ("application_failure_info", "Application error"),
    ("timeout_failure_info", "Timeout"),
    ("canceled_failure_info", "Canceled"),
    ("terminated_failure_info", "Terminated"),
    ("server_failure_info", "Server error"),
    ("activity_failure_info", "Activity failure"),
    ("child_workflow_execution_failure_info", "Child workflow failure"),
)


def cause_words(cause: str) -> str:
    """A workflow task failure's cause (``WORKFLOW_TASK_FAILED_CAUSE_…``) as a sentence part."""
    key = cause.removeprefix(CAUSE_PREFIX)
    return CAUSE_WORDS.get(key, key.replace("_", " ").lower())


def failure_chain(failure: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The failure and its causes, outermost first."""
    chain: list[dict[str, Any]] = []
    while isinstance(failure, dict) and len(chain) < MAX_CAUSE_DEPTH:
        chain.append(failure)
        failure = failure.get("cause")
    return chain


def failure_type(failure: dict[str, Any]) -> str:
    """The failure's kind in words, with the application error's own type when it has one."""
    for key, words_ in FAILURE_KINDS:
        info = failure.get(key)
        if isinstance(info, dict):
            detail = info.get("type") or info.get("timeout_type") or ""
            return f"{words_}: {detail}" if detail else words_
    return "Failure"


def root_message(failure: dict[str, Any] | None) -> str:
    """The innermost cause's message: the one that says what went wrong."""
    chain = failure_chain(failure)
    return str(chain[-1].get("message") or "") if chain else ""


@dataclass(frozen=True)
class RootFailure:
    """The innermost cause of a failure and where it came from."""

    message: str
    type: str
    wrappers: list[str]  # the outer messages, outermost first
    activity_type: str = ""
    activity_id: str = ""
    attempt: int | None = None
    child_workflow_id: str = ""
    child_run_id: str = ""
    stack_trace: str = ""


def root_failure(ex: WorkflowExecution, failure: dict[str, Any] | None) -> RootFailure | None:
    """``failure``'s innermost cause, the activity or child that raised it and its attempt."""
    chain = failure_chain(failure)
    if not chain:
        return None
    root = chain[-1]
    activity: dict[str, Any] = next(
        (f["activity_failure_info"] for f in reversed(chain) if f.get("activity_failure_info")), {}
    )
    child: dict[str, Any] = next(
        (
            f["child_workflow_execution_failure_info"]
            for f in reversed(chain)
            if f.get("child_workflow_execution_failure_info")
        ),
        {},
    )
    execution = child.get("workflow_execution") or {}
    return RootFailure(
        message=str(root.get("message") or ""),
        type=failure_type(root),
        wrappers=[str(f.get("message") or "") for f in chain[:-1]],
        activity_type=str(activity.get("activity_type") or ""),
        activity_id=str(activity.get("activity_id") or ""),
        attempt=_activity_attempt(ex, activity) if activity else None,
        child_workflow_id=str(execution.get("workflow_id") or ""),
        child_run_id=str(execution.get("run_id") or ""),
        stack_trace=str(root.get("stack_trace") or ""),
    )


def _activity_attempt(ex: WorkflowExecution, info: dict[str, Any]) -> int | None:
    """The attempt that failed: history keeps it on the activity's ``ActivityTaskStarted``."""
    started = info.get("started_event_id")
    if not started:
        return None
    value = (
        HistoryEvent.objects.filter(run=ex, event_id=started)
        .annotate(attempt=KT("attributes__attempt"))
        .values_list("attempt", flat=True)
        .first()
    )
    return int(value) if value else None


@dataclass(frozen=True)
class Wait:
    """One thing an open run waits on, in words, with the moment that matters to it."""

    text: str
    moment: datetime | None = None
    moment_words: str = ""  # what the moment is ("fires", "next try")
    detail: str = ""


def waiting_on(
    ex: WorkflowExecution,
    activities: list[dict[str, Any]],
    timers: list[PendingTimer],
    children: list[dict[str, Any]],
) -> list[Wait]:
    """What the open run is blocked by now: activities, timers, children, its workflow task."""
    if not ex.is_running:
        return []
    waits = [_activity_wait(a) for a in activities]
    waits += [Wait(f"Timer {t.timer_id}", t.fire_at, "fires") for t in timers]
    waits += [
        Wait(
            f"Child workflow {c['workflow_id']} ({c['workflow_type']})",
            detail="" if c["run_id"] else "not started yet",
        )
        for c in children
    ]
    task = _task_wait(ex)
    if task is not None:
        waits.append(task)
    if not waits:
        waits.append(Wait("A signal or a condition: no activity, timer, child or workflow task is pending"))
    if ex.cancel_requested:
        waits.append(Wait("Cancellation was requested; the workflow has not finished cancelling"))
    return waits


def _activity_wait(a: dict[str, Any]) -> Wait:
    text = f"Activity {a['activity_type']} ({a['activity_id']}), attempt {a['attempt']}"
    failure = a.get("last_failure")
    detail = f"last failure: {root_message(failure)}" if failure else ""
    if a["state"] == "STARTED":
        worker = a.get("last_worker_identity") or "a worker"
        return Wait(f"{text}, running on {worker}", detail=detail)
    next_try = words.as_datetime(a.get("next_attempt_schedule_time"))
    if a["attempt"] > 1:
        return Wait(f"{text}, waiting to retry", next_try, "next try", detail)
    return Wait(f"{text}, waiting for a worker to pick it up", detail=detail)


def _task_wait(ex: WorkflowExecution) -> Wait | None:
    if not ex.wft_scheduled_event_id:
        return None
    if ex.wft_started_event_id:
        return Wait(f"A workflow task, being run by {ex.wft_identity or 'a worker'}")
    queue = ex.wft_task_queue or ex.task_queue
    return Wait(f"A workflow task, waiting for a worker on {queue}", ex.wft_scheduled_time, "scheduled")
