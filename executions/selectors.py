"""Reads of executions as seen from outside: describe, list, history pages."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from chronicle.errors import ChronicleError, ErrorCode, invalid, not_found
from executions import page_tokens, visibility
from history.kernel import store
from history.kernel.locks import shard_for
from history.kernel.responses import execution_summary, serialize_event
from history.kernel.schedules import upcoming_action_times
from history.kernel.wire import event_dict
from history.models import (
    ExecutionStatus,
    HistoryEvent,
    Payload,
    PendingActivity,
    PendingChildExecution,
    Schedule,
    WorkflowExecution,
)
from namespaces.models import Namespace

HISTORY_MAX_PAGE = 256
DIGEST_CHARS = frozenset("0123456789abcdef")


def execution_get(namespace: Namespace, workflow_id: str, run_id: str | None) -> WorkflowExecution:
    qs = WorkflowExecution.objects.filter(
        namespace=namespace, workflow_id=workflow_id, shard_id=shard_for(namespace.id, workflow_id)
    )
    if run_id:
        qs = qs.filter(run_id=_run_uuid(run_id))
    execution = qs.order_by("-start_time").first()
    if execution is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"workflow execution {workflow_id!r} not found")
    return execution


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
        for a in PendingActivity.objects.filter(run=ex, shard_id=ex.shard_id).order_by("scheduled_event_id")
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
        for c in PendingChildExecution.objects.filter(run=ex, shard_id=ex.shard_id).order_by(
            "initiated_event_id"
        )
    ]


def history_page(
    ex: WorkflowExecution, *, after_event_id: int, page_size: int
) -> tuple[list[dict[str, Any]], int | None]:
    """Events after ``after_event_id``; the second value is the next page's cursor."""
    page_size = _page_size(page_size)
    events = list(
        HistoryEvent.objects.filter(run=ex, shard_id=ex.shard_id, event_id__gt=after_event_id).order_by(
            "event_id"
        )[: page_size + 1]
    )
    more = len(events) > page_size
    events = events[:page_size]
    return [serialize_event(e) for e in events], (events[-1].event_id if more else None)


def _page_size(asked: int) -> int:
    return max(1, min(asked, HISTORY_MAX_PAGE))


def execution_list(
    namespace: Namespace, *, query: str = "", page_size: int = 100, next_page_token: str = ""
) -> tuple[list[dict[str, Any]], str | None]:
    """One keyset page of the runs ``query`` selects (see ``executions.visibility``)."""
    rows, token = visibility.page(namespace, query, page_size=page_size, next_page_token=next_page_token)
    return [execution_summary(r) for r in rows], token


def schedule_get(namespace: Namespace, schedule_id: str) -> Schedule:
    schedule = Schedule.objects.filter(namespace=namespace, schedule_id=schedule_id).first()
    if schedule is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"schedule {schedule_id!r} not found")
    return schedule


def schedule_describe(schedule: Schedule) -> dict[str, Any]:
    """The definition as the client sent it, plus what the schedule has done (``info``).

    ``running_actions`` is read against the runs' status now, so a run that closed a
    moment ago is not reported running while the schedule has yet to fire again.
    """
    running_ids = [a["run_id"] for a in schedule.running_actions]
    still_running = {
        str(r)
        for r in WorkflowExecution.objects.filter(
            namespace_id=schedule.namespace_id, run_id__in=running_ids, status=ExecutionStatus.RUNNING
        ).values_list("run_id", flat=True)
    }
    return {
        "schedule_id": schedule.schedule_id,
        "conflict_token": schedule.conflict_token,
        "memo": schedule.memo,
        "schedule": {
            "spec": schedule.spec,
            "action": schedule.action,
            "policy": schedule.policy,
            "state": {
                "paused": schedule.paused,
                "note": schedule.note,
                "limited_actions": schedule.limited_actions,
                "remaining_actions": schedule.remaining_actions,
            },
        },
        "info": {
            "num_actions": schedule.num_actions,
            "num_actions_missed_catchup_window": schedule.num_actions_missed_catchup_window,
            "num_actions_skipped_overlap": schedule.num_actions_skipped_overlap,
            "running_actions": [a for a in schedule.running_actions if a["run_id"] in still_running],
            "recent_actions": schedule.recent_actions,
            "next_action_times": [t.isoformat() for t in upcoming_action_times(schedule)],
            "buffered_actions": len(schedule.buffered_starts),
            "created_at": schedule.created_at.isoformat(),
            "last_updated_at": schedule.last_updated_at.isoformat() if schedule.last_updated_at else None,
        },
    }


SCHEDULE_CURSOR_KIND = "schedules"


def schedule_list(
    namespace: Namespace, *, page_size: int = 100, cursor: str = ""
) -> tuple[list[dict[str, Any]], str | None]:
    """Schedules in id order, a page at a time.

    The cursor is the page's last schedule id, signed for this namespace
    (``executions.page_tokens``): a cursor from another namespace, or one nobody minted,
    is refused alike (400 ``malformed cursor``).
    """
    qs = Schedule.objects.filter(namespace=namespace).order_by("schedule_id")
    if cursor:
        after = page_tokens.read(SCHEDULE_CURSOR_KIND, namespace, cursor)
        if not isinstance(after, str):
            raise invalid("malformed cursor", field="cursor")
        qs = qs.filter(schedule_id__gt=after)
    rows = list(qs[: page_size + 1])
    more = len(rows) > page_size
    rows = rows[:page_size]
    next_cursor = page_tokens.mint(SCHEDULE_CURSOR_KIND, namespace, rows[-1].schedule_id) if more else None
    return [schedule_describe(s) for s in rows], next_cursor


def payload_get(namespace: Namespace, digest: str) -> dict[str, Any]:
    """A stored payload's full value, looked up by the digest an event's reference names."""
    if len(digest) != 64 or not set(digest) <= DIGEST_CHARS:
        raise invalid("digest must be a lowercase hex SHA-256 (64 characters)", field="digest")
    payload = Payload.objects.filter(namespace=namespace, digest=digest).first()
    if payload is None:
        raise not_found(f"payload {digest} not found")
    return {"sha256": payload.digest, "size_bytes": payload.size, "payload": payload.data}


@dataclass(frozen=True)
class RunClose:
    """A run as a close-only history read sees it: its status, the run that carries on
    after it, and its close event once it has one."""

    run_id: uuid.UUID
    status: str
    new_run_id: uuid.UUID | None
    close_event: dict[str, Any] | None

    @property
    def closed(self) -> bool:
        return self.status != ExecutionStatus.RUNNING


def run_close(namespace: Namespace, workflow_id: str, run_id: str | None) -> RunClose:
    """The given run, else the latest of ``workflow_id``, with its close event, in one fixed
    statement: every ``result()`` waits with this read, and the run read by the ORM, then
    its close event, was three statements and as many trips to the pool."""
    shard = shard_for(namespace.pk, workflow_id)
    params: list[Any] = [ExecutionStatus.RUNNING.value, namespace.pk, workflow_id, shard]
    sql = _RUN_CLOSE_LATEST
    if run_id:
        params.append(_run_uuid(run_id))
        sql = _RUN_CLOSE_GIVEN
    with store.bound_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"workflow execution {workflow_id!r} not found")
    found_run, status, new_run_id, event_id, event_type, event_time, attributes = row
    event = None
    if event_id is not None:
        event = event_dict(event_id, event_type, event_time, json.loads(attributes))
    return RunClose(found_run, status, new_run_id, event)


_RUN_CLOSE = (
    "SELECT e.run_id, e.status, e.new_run_id, h.event_id, h.event_type, h.event_time, h.attributes "
    f"FROM {WorkflowExecution._meta.db_table} e LEFT JOIN {HistoryEvent._meta.db_table} h "
    "ON h.run_id = e.run_id AND h.shard_id = e.shard_id AND h.event_id = e.next_event_id - 1 "
    "AND e.status <> %s WHERE e.namespace_id = %s AND e.workflow_id = %s AND e.shard_id = %s {which} "
    "ORDER BY e.start_time DESC LIMIT 1"
)
_RUN_CLOSE_LATEST = _RUN_CLOSE.format(which="")
_RUN_CLOSE_GIVEN = _RUN_CLOSE.format(which="AND e.run_id = %s")


def _run_uuid(run_id: str | uuid.UUID) -> uuid.UUID:
    """A run id from the path as a UUID (400 if it is none)."""
    if isinstance(run_id, uuid.UUID):
        return run_id
    try:
        return uuid.UUID(run_id)
    except ValueError:
        raise invalid("run_id must be a UUID") from None


class RunKey(Protocol):
    """What a history read needs of a run to read it again: its identity and the status
    its page reports (a stored run, or the :class:`RunHead` a read returned)."""

    @property
    def namespace_id(self) -> uuid.UUID: ...
    @property
    def workflow_id(self) -> str: ...
    @property
    def run_id(self) -> uuid.UUID: ...
    @property
    def status(self) -> str: ...
    @property
    def new_run_id(self) -> uuid.UUID | None: ...


@dataclass(frozen=True)
class RunHead:
    """A run as a history read saw it, in the same snapshot as the page read with it."""

    namespace_id: uuid.UUID
    workflow_id: str
    run_id: uuid.UUID
    status: str
    new_run_id: uuid.UUID | None


@dataclass(frozen=True)
class HistoryPage:
    """A run and a page of its events, read together; ``cursor`` is the next page's
    ``after_event_id`` (None on the last page)."""

    run: RunHead
    events: list[dict[str, Any]]
    cursor: int | None


def history_read(
    namespace_id: uuid.UUID,
    workflow_id: str,
    run_id: str | uuid.UUID | None,
    *,
    after_event_id: int,
    page_size: int,
) -> HistoryPage:
    """The given run (else the latest of ``workflow_id``) in ``namespace_id``, and its
    events after ``after_event_id``, in one fixed, prepared statement.

    A worker that lost a run reads its whole history, a thousand at once when timers fall
    due together: the run by the ORM, its events, then its status again (so a page saying
    "closed" held the close) were three statements and two trips. One statement reads one
    snapshot, so the status and the events agree by construction: a run whose status says
    closed has its close event committed with it, and one that closes after the read is
    reported running, for its follower to read again.
    """
    size = _page_size(page_size)
    params: list[Any] = [namespace_id, workflow_id, shard_for(namespace_id, workflow_id)]
    sql = _HISTORY_READ_LATEST
    if run_id:
        params.append(_run_uuid(run_id))
        sql = _HISTORY_READ_GIVEN
    params += [after_event_id, size + 1]
    with store.bound_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"workflow execution {workflow_id!r} not found")
    found_run, status, new_run_id = rows[0][:3]
    run = RunHead(namespace_id, workflow_id, found_run, status, new_run_id)
    if rows[0][3] is None:  # the run, without an event after the cursor
        return HistoryPage(run, [], None)
    events = [event_dict(i, kind, at, json.loads(attrs)) for _, _, _, i, kind, at, attrs in rows[:size]]
    return HistoryPage(run, events, events[-1]["event_id"] if len(rows) > size else None)


# The run (the newest matching, as the ORM's ``order_by("-start_time").first()`` read it),
# then its events by the per-run index, a row each (the run's columns repeated), or one
# row of NULL events if it has none after the cursor.
_HISTORY_READ = (
    "WITH r AS (SELECT e.run_id, e.shard_id, e.status, e.new_run_id "
    f"FROM {WorkflowExecution._meta.db_table} e "
    "WHERE e.namespace_id = %s AND e.workflow_id = %s AND e.shard_id = %s {which} "
    "ORDER BY e.start_time DESC LIMIT 1) "
    "SELECT r.run_id, r.status, r.new_run_id, h.event_id, h.event_type, h.event_time, h.attributes "
    "FROM r LEFT JOIN LATERAL (SELECT event_id, event_type, event_time, attributes "
    f"FROM {HistoryEvent._meta.db_table} "
    "WHERE run_id = r.run_id AND shard_id = r.shard_id AND event_id > %s ORDER BY event_id LIMIT %s"
    ") h ON true ORDER BY h.event_id"
)
_HISTORY_READ_LATEST = _HISTORY_READ.format(which="")
_HISTORY_READ_GIVEN = _HISTORY_READ.format(which="AND e.run_id = %s")
