"""What a worker receives for a workflow task: shared by polls, inline and eager starts."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from history.kernel import store, tokens
from history.kernel.growth import continue_as_new_suggestion
from history.kernel.updates import update_requests
from history.kernel.versioning import wire_build_id
from history.kernel.wire import event_dict
from history.models import HistoryEvent, WorkflowExecution
from history.vocabulary import EventType


@dataclass
class WorkflowTaskResponse:
    task_token: str
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    attempt: int
    previous_started_event_id: int
    started_event_id: int
    history: list[dict[str, Any]]
    query: dict[str, Any] | None = None
    queries: dict[str, dict[str, Any]] | None = None
    messages: list[dict[str, Any]] | None = None  # the update requests the task carries

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_token": self.task_token,
            "workflow_execution": {"workflow_id": self.workflow_id, "run_id": self.run_id},
            "workflow_type": {"name": self.workflow_type},
            "workflow_execution_task_queue": {"name": self.task_queue},
            "attempt": self.attempt,
            "previous_started_event_id": self.previous_started_event_id,
            "started_event_id": self.started_event_id,
            "history": {"events": self.history},
            "query": self.query,
            "queries": self.queries or {},
            "messages": self.messages or [],
        }


def serialize_event(event: HistoryEvent) -> dict[str, Any]:
    return event_dict(event.event_id, event.event_type, event.event_time, event.attributes)


_EVENTS_AFTER = (
    f"SELECT event_id, event_type, event_time, attributes FROM {HistoryEvent._meta.db_table} "
    "WHERE run_id = %s AND shard_id = %s AND event_id > %s ORDER BY event_id"
)


def _history_for(ex: WorkflowExecution, *, after: int) -> list[dict[str, Any]]:
    """The events after ``after``, read as plain rows with one fixed statement: every poll
    builds this, and a model instance per event, or the ORM compiling the query each
    time, cost more than reading them. (``attributes`` comes as JSON text, as Django reads
    a ``jsonb`` column.)"""
    with store.bound_cursor() as cursor:
        cursor.execute(_EVENTS_AFTER, [ex.run_id, ex.shard_id, after])
        rows = cursor.fetchall()
    return [event_dict(event_id, kind, time, store.read_json(attrs)) for event_id, kind, time, attrs in rows]


# Run by run through the run's event index (a LATERAL subquery, kept apart by OFFSET 0):
# as a join, the planner hashed the whole event table once a burst named a dozen runs.
_EVENTS_AFTER_EACH = (
    "SELECT e.run_id, e.event_id, e.event_type, e.event_time, e.attributes "
    "FROM unnest(%s::uuid[], %s::int[], %s::bigint[]) AS w(run_id, shard_id, after) "
    "CROSS JOIN LATERAL (SELECT run_id, event_id, event_type, event_time, attributes "
    f"FROM {HistoryEvent._meta.db_table} "
    "WHERE run_id = w.run_id AND shard_id = w.shard_id AND event_id > w.after OFFSET 0) e "
    "ORDER BY e.run_id, e.event_id"
)


def histories_after(reads: Sequence[tuple[WorkflowExecution, int]]) -> dict[uuid.UUID, list[dict[str, Any]]]:
    """Each run's events after its own event id, for a batch of tasks in one statement
    (one read per task was a round trip and a statement per claimed task)."""
    if len(reads) == 1:
        ex, after = reads[0]
        return {ex.run_id: _history_for(ex, after=after)}
    histories: dict[uuid.UUID, list[dict[str, Any]]] = {ex.run_id: [] for ex, _ in reads}
    params = [
        store.array_literal(ex.run_id for ex, _ in reads),
        store.array_literal(ex.shard_id for ex, _ in reads),
        store.array_literal(after for _, after in reads),
    ]
    with store.bound_cursor() as cursor:
        cursor.execute(_EVENTS_AFTER_EACH, params)
        rows = cursor.fetchall()
    for run_id, event_id, kind, time, attrs in rows:
        histories[run_id].append(event_dict(event_id, kind, time, store.read_json(attrs)))
    return histories


def history_start(ex: WorkflowExecution, *, sticky: bool) -> int:
    """The event a task's history starts after: the last task's start for a sticky queue
    (the worker holds the rest), none otherwise."""
    return ex.last_wft_started_event_id if sticky else 0


def _transient_events(ex: WorkflowExecution) -> list[dict[str, Any]]:
    if ex.wft_attempt == 1:
        return []
    time = ex.wft_started_time or ex.wft_scheduled_time
    stamp = time.isoformat() if time else None
    return [
        {
            "event_id": ex.wft_scheduled_event_id,
            "event_type": EventType.WORKFLOW_TASK_SCHEDULED,
            "event_time": stamp,
            "attributes": {
                "task_queue": {"name": ex.wft_task_queue},
                "attempt": ex.wft_attempt,
                "start_to_close_timeout": ex.task_timeout,
            },
        },
        {
            "event_id": ex.wft_started_event_id,
            "event_type": EventType.WORKFLOW_TASK_STARTED,
            "event_time": stamp,
            "attributes": {
                "scheduled_event_id": ex.wft_scheduled_event_id,
                "identity": ex.wft_identity,
                "request_id": ex.wft_request_id,
                **continue_as_new_suggestion(ex, ex.namespace),
            },
        },
    ]


def build_workflow_task_response(
    ex: WorkflowExecution, *, sticky: bool, history: list[dict[str, Any]] | None = None
) -> WorkflowTaskResponse:
    """The poll answer: full history, or only new events on a sticky queue (``history``:
    those events, when the caller read them with other runs' in one statement)."""
    token = tokens.encode(
        "wft",
        ex.namespace_id,
        r=str(ex.run_id),
        h=ex.shard_id,
        s=ex.wft_scheduled_event_id,
        st=ex.wft_started_event_id,
        a=ex.wft_attempt,
    )
    if history is None:
        history = _history_for(ex, after=history_start(ex, sticky=sticky))
    return WorkflowTaskResponse(
        task_token=token,
        workflow_id=ex.workflow_id,
        run_id=str(ex.run_id),
        workflow_type=ex.workflow_type,
        task_queue=ex.task_queue,
        attempt=ex.wft_attempt,
        previous_started_event_id=ex.last_wft_started_event_id,
        started_event_id=ex.wft_started_event_id,
        history=history + _transient_events(ex),
        messages=update_requests(ex),
    )


def execution_summary(ex: WorkflowExecution) -> dict[str, Any]:
    """A run as lists, describes and archives show it: ids, type, status, times, links."""
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
        "assigned_build_id": wire_build_id(ex.assigned_build_id),
        "reset_base_run_id": str(ex.reset_base_run_id) if ex.reset_base_run_id else None,
        "reset_event_id": ex.reset_event_id or None,
        "reset_run_id": str(ex.reset_run_id) if ex.reset_run_id else None,
    }
