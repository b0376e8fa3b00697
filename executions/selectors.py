"""Reads of executions as seen from outside: describe, list, history pages."""

from __future__ import annotations

import uuid
from typing import Any

from chronicle.errors import ChronicleError, ErrorCode, invalid
from executions import visibility
from history.kernel.responses import serialize_event
from history.models import HistoryEvent, PendingActivity, PendingChildExecution, WorkflowExecution
from namespaces.models import Namespace

HISTORY_MAX_PAGE = 256


def execution_get(namespace: Namespace, workflow_id: str, run_id: str | None) -> WorkflowExecution:
    qs = WorkflowExecution.objects.filter(namespace=namespace, workflow_id=workflow_id)
    if run_id:
        try:
            qs = qs.filter(run_id=uuid.UUID(run_id))
        except ValueError:
            raise invalid("run_id must be a UUID") from None
    execution = qs.order_by("-start_time").first()
    if execution is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"workflow execution {workflow_id!r} not found")
    return execution


def execution_summary(ex: WorkflowExecution) -> dict[str, Any]:
    return {
        "workflow_id": ex.workflow_id,
        "run_id": str(ex.run_id),
        "workflow_type": ex.workflow_type,
        "task_queue": ex.task_queue,
        "status": ex.status,
        "start_time": ex.start_time.isoformat(),
        "execution_time": ex.execution_time.isoformat(),
        "close_time": ex.close_time.isoformat() if ex.close_time else None,
        "history_length": ex.next_event_id - 1,
        "history_size_bytes": ex.history_size_bytes,
        "memo": ex.memo,
        "search_attributes": ex.search_attributes,
        "first_run_id": str(ex.first_run_id),
        "previous_run_id": str(ex.previous_run_id) if ex.previous_run_id else None,
        "new_run_id": str(ex.new_run_id) if ex.new_run_id else None,
        "reset_base_run_id": str(ex.reset_base_run_id) if ex.reset_base_run_id else None,
        "reset_event_id": ex.reset_event_id or None,
        "reset_run_id": str(ex.reset_run_id) if ex.reset_run_id else None,
    }


def execution_describe(ex: WorkflowExecution) -> dict[str, Any]:
    pending = [
        {
            "activity_id": a.activity_id,
            "activity_type": a.activity_type,
            "state": a.state,
            "attempt": a.attempt,
            "scheduled_event_id": a.scheduled_event_id,
            "last_failure": a.last_failure,
            "heartbeat_details": a.heartbeat_details,
            "last_heartbeat_time": a.last_heartbeat_time.isoformat() if a.last_heartbeat_time else None,
            "next_attempt_schedule_time": a.scheduled_time.isoformat() if a.state == "SCHEDULED" else None,
            "last_worker_identity": a.last_worker_identity,
        }
        for a in PendingActivity.objects.filter(run=ex).order_by("scheduled_event_id")
    ]
    return {
        **execution_summary(ex),
        "result": ex.result,
        "failure": ex.failure,
        "execution_timeout": ex.execution_timeout,
        "run_timeout": ex.run_timeout,
        "task_timeout": ex.task_timeout,
        "cron_schedule": ex.cron_schedule,
        "attempt": ex.attempt,
        "pending_activities": pending,
        "pending_workflow_task": {
            "scheduled_event_id": ex.wft_scheduled_event_id,
            "started": bool(ex.wft_started_event_id),
            "attempt": ex.wft_attempt,
            "task_queue": ex.wft_task_queue,
        }
        if ex.wft_scheduled_event_id
        else None,
        "sticky_task_queue": ex.sticky_task_queue,
        "parent_workflow_id": ex.parent_workflow_id,
        "parent_run_id": str(ex.parent_run_id) if ex.parent_run_id else None,
        "pending_children": _pending_children(ex),
    }


def _pending_children(ex: WorkflowExecution) -> list[dict[str, Any]]:
    return [
        {
            "workflow_id": c.workflow_id,
            "workflow_type": c.workflow_type,
            "run_id": str(c.started_run_id) if c.started_run_id else None,
            "initiated_event_id": c.initiated_event_id,
            "parent_close_policy": c.parent_close_policy,
        }
        for c in PendingChildExecution.objects.filter(run=ex).order_by("initiated_event_id")
    ]


def history_page(
    ex: WorkflowExecution, *, after_event_id: int, page_size: int
) -> tuple[list[dict[str, Any]], int | None]:
    """Events after ``after_event_id``; the second value is the next page's cursor."""
    page_size = max(1, min(page_size, HISTORY_MAX_PAGE))
    events = list(
        HistoryEvent.objects.filter(run=ex, event_id__gt=after_event_id).order_by("event_id")[: page_size + 1]
    )
    more = len(events) > page_size
    events = events[:page_size]
    return [serialize_event(e) for e in events], (events[-1].event_id if more else None)


def execution_list(
    namespace: Namespace, *, query: str = "", page_size: int = 100, next_page_token: str = ""
) -> tuple[list[dict[str, Any]], str | None]:
    """One keyset page of the runs ``query`` selects (see ``executions.visibility``)."""
    rows, token = visibility.page(namespace, query, page_size=page_size, next_page_token=next_page_token)
    return [execution_summary(r) for r in rows], token
