"""Activities: schedule, start (for matching), heartbeat, complete, fail, cancel, time out.

Attempts that are retried write no events; when the activity finally ends the kernel
writes ``ActivityTaskStarted`` (late, with the final attempt) then the close event.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from django.db import models, transaction

from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.faults import crash_point
from history.kernel import handoff, store, tokens
from history.kernel._mutation import PREVIOUS_EVENT, ExecutionMutation
from history.kernel.handoff import WorkflowTaskWanted
from history.kernel.locks import lock_run_and_row
from history.kernel.payloads import check_payload
from history.kernel.responses import WorkflowTaskResponse
from history.kernel.retry import decide_retry, normalize_activity_timeouts
from history.models import ActivityState, PendingActivity, TaskKind, TimerKind, WorkflowExecution
from history.vocabulary import EventType


def schedule_activity_txn(
    m: ExecutionMutation,
    *,
    activity_id: str,
    activity_type: str,
    task_queue: str,
    input: list[Any],
    header: dict[str, Any],
    retry_policy: dict[str, Any],
    schedule_to_close: float,
    schedule_to_start: float,
    start_to_close: float,
    heartbeat: float,
    completed_event_id: int,
    dispatch: bool = True,
) -> PendingActivity:
    """Write ActivityTaskScheduled and the pending row; raise ValueError on bad timeouts."""
    t = normalize_activity_timeouts(
        schedule_to_close=schedule_to_close,
        schedule_to_start=schedule_to_start,
        start_to_close=start_to_close,
        heartbeat=heartbeat,
        run_timeout=m.execution.run_timeout,
    )
    scheduled = m.append(
        EventType.ACTIVITY_TASK_SCHEDULED,
        {
            "activity_id": activity_id,
            "activity_type": {"name": activity_type},
            "task_queue": {"name": task_queue},
            "input": input,
            "header": header,
            "schedule_to_close_timeout": t.schedule_to_close,
            "schedule_to_start_timeout": t.schedule_to_start,
            "start_to_close_timeout": t.start_to_close,
            "heartbeat_timeout": t.heartbeat,
            "retry_policy": retry_policy,
            "workflow_task_completed_event_id": completed_event_id,
        },
    )
    return _create_pending(
        m,
        scheduled,
        dispatch=dispatch,
        activity_id=activity_id,
        activity_type=activity_type,
        task_queue=task_queue,
        input=input,
        header=header,
        retry_policy=retry_policy,
        schedule_to_close_timeout=t.schedule_to_close,
        schedule_to_start_timeout=t.schedule_to_start,
        start_to_close_timeout=t.start_to_close,
        heartbeat_timeout=t.heartbeat,
    )


def _create_pending(
    m: ExecutionMutation, scheduled: int, *, dispatch: bool, **fields: Any
) -> PendingActivity:
    """The pending row of a scheduled activity (inserted with the run's write), its
    schedule-to-close timer and first dispatch."""
    activity = PendingActivity(
        run=m.execution,
        shard_id=m.execution.shard_id,
        scheduled_event_id=scheduled,
        state=ActivityState.SCHEDULED,
        first_scheduled_time=m.now,
        scheduled_time=m.now,
        **fields,
    )
    m.add_activity(activity)
    if activity.schedule_to_close_timeout > 0:
        m.add_timer(
            TimerKind.ACTIVITY_TIMEOUT,
            m.now + timedelta(seconds=activity.schedule_to_close_timeout),
            scheduled_event_id=scheduled,
            attempt=0,
            timeout_type="SCHEDULE_TO_CLOSE",
        )
    if dispatch:
        dispatch_attempt(m, activity)
    return activity


@functools.lru_cache(maxsize=32)
def _model_fields(names: tuple[str, ...]) -> tuple[models.Field[Any, Any], ...]:
    """The pending-activity fields of these names (cached: a few fixed lists ask)."""
    found = [PendingActivity._meta.get_field(name) for name in names]
    return tuple(f for f in found if isinstance(f, models.Field))


def save_activity_fields(activity: PendingActivity, fields: list[str]) -> None:
    """Write these fields of a stored row now, on its shard; a row this change added goes
    in whole."""
    if not activity._state.adding:
        write = store.Write()
        store.update_fields(write, activity, _model_fields(tuple(fields)))
        store.send(write)


def restore_activity_txn(m: ExecutionMutation, scheduled_event_id: int, attrs: dict[str, Any]) -> None:
    """Reset: an activity pending at the reset point is scheduled again from now, attempt 1.

    ``attrs`` are its recorded ``ActivityTaskScheduled`` attributes, whose timeouts
    were already normalised when the event was written.
    """
    _create_pending(
        m,
        scheduled_event_id,
        dispatch=True,
        activity_id=attrs["activity_id"],
        activity_type=(attrs.get("activity_type") or {}).get("name", ""),
        task_queue=(attrs.get("task_queue") or {}).get("name", m.execution.task_queue),
        input=attrs.get("input") or [],
        header=attrs.get("header") or {},
        retry_policy=attrs.get("retry_policy") or {},
        schedule_to_close_timeout=float(attrs.get("schedule_to_close_timeout") or 0),
        schedule_to_start_timeout=float(attrs.get("schedule_to_start_timeout") or 0),
        start_to_close_timeout=float(attrs.get("start_to_close_timeout") or 0),
        heartbeat_timeout=float(attrs.get("heartbeat_timeout") or 0),
    )


def dispatch_attempt(m: ExecutionMutation, activity: PendingActivity) -> None:
    m.add_task(TaskKind.ACTIVITY, activity.task_queue, activity.scheduled_event_id, activity.attempt)
    s2s = activity.schedule_to_start_timeout
    if (s2s > 0 and s2s < activity.schedule_to_close_timeout) or (
        s2s > 0 and not activity.schedule_to_close_timeout
    ):
        m.add_timer(
            TimerKind.ACTIVITY_TIMEOUT,
            m.now + timedelta(seconds=s2s),
            scheduled_event_id=activity.scheduled_event_id,
            attempt=activity.attempt,
            timeout_type="SCHEDULE_TO_START",
        )


def activity_task_dict(ex: WorkflowExecution, activity: PendingActivity) -> dict[str, Any]:
    token = tokens.encode(
        "act",
        ex.namespace_id,
        r=str(ex.run_id),
        h=ex.shard_id,
        s=activity.scheduled_event_id,
        a=activity.attempt,
    )
    return {
        "task_token": token,
        "workflow_execution": {"workflow_id": ex.workflow_id, "run_id": str(ex.run_id)},
        "workflow_type": {"name": ex.workflow_type},
        "workflow_namespace": ex.namespace.name,
        "activity_id": activity.activity_id,
        "activity_type": {"name": activity.activity_type},
        "task_queue": activity.task_queue,
        "input": activity.input,
        "header": activity.header,
        "attempt": activity.attempt,
        "scheduled_event_id": activity.scheduled_event_id,
        "scheduled_time": activity.scheduled_time.isoformat(),
        "current_attempt_scheduled_time": activity.scheduled_time.isoformat(),
        "started_time": activity.started_time.isoformat() if activity.started_time else None,
        "schedule_to_close_timeout": activity.schedule_to_close_timeout,
        "start_to_close_timeout": activity.start_to_close_timeout,
        "heartbeat_timeout": activity.heartbeat_timeout,
        "heartbeat_details": activity.heartbeat_details,
        "retry_policy": activity.retry_policy,
    }


# What starting an attempt changes on its pending row.
_STARTED_FIELDS = ["state", "started_time", "started_identity", "started_request_id", "last_heartbeat_time"]


def start_activity_txn(
    m: ExecutionMutation,
    activity: PendingActivity,
    *,
    identity: str,
    request_id: str,
) -> dict[str, Any]:
    """Mark the attempt started (no event yet) and arm its start-to-close/heartbeat timers."""
    activity.state = ActivityState.STARTED
    activity.started_time = m.now
    activity.started_identity = identity
    activity.started_request_id = request_id
    activity.last_heartbeat_time = None
    save_activity_fields(activity, _STARTED_FIELDS)
    m.add_timer(
        TimerKind.ACTIVITY_TIMEOUT,
        m.now + timedelta(seconds=activity.start_to_close_timeout),
        scheduled_event_id=activity.scheduled_event_id,
        attempt=activity.attempt,
        timeout_type="START_TO_CLOSE",
    )
    if activity.heartbeat_timeout > 0:
        m.add_timer(
            TimerKind.ACTIVITY_TIMEOUT,
            m.now + timedelta(seconds=activity.heartbeat_timeout),
            scheduled_event_id=activity.scheduled_event_id,
            attempt=activity.attempt,
            timeout_type="HEARTBEAT",
        )
    return activity_task_dict(m.execution, activity)


def record_activity_task_started_txn(
    ex: WorkflowExecution,
    *,
    scheduled_event_id: int,
    attempt: int,
    identity: str,
    request_id: str,
) -> dict[str, Any] | None:
    """For matching: start the claimed attempt if still current; None if stale."""
    if not ex.is_running:
        return None
    activity = _lock_pending_activity(ex, scheduled_event_id)
    if activity is None or activity.attempt != attempt or activity.state != ActivityState.SCHEDULED:
        return None
    m = ExecutionMutation(ex, ex.namespace)
    task = start_activity_txn(m, activity, identity=identity, request_id=request_id)
    m.save()
    return task


def lock_activity(
    token: dict[str, Any], scope: tokens.TaskScope
) -> tuple[ExecutionMutation, PendingActivity]:
    """Lock the token's run and activity; refuse one of another namespace or queue as
    unknown, and an attempt that has moved on as stale."""
    tokens.check_issued_in(token, scope)
    shard = tokens.token_shard(token)
    found = lock_run_and_row(token["r"], PendingActivity, "scheduled_event_id", token["s"], shard_id=shard)
    activity: PendingActivity | None
    if found is not None and found[0].namespace_id == scope.namespace_id and found[0].is_running:
        ex, activity = found  # the usual case: one statement locks both
    else:  # the slow way finds out which answer it is
        ex = tokens.lock_token_run(token, scope)
        activity = _lock_pending_activity(ex, token["s"]) if ex.is_running else None
    if activity is not None:
        tokens.check_scope(scope, namespace_id=ex.namespace_id, queues=(activity.task_queue,))
    if activity is None or activity.attempt != token["a"] or activity.state != ActivityState.STARTED:
        raise ChronicleError(ErrorCode.STALE_TASK, "activity task not found (stale or completed)")
    return ExecutionMutation(ex, ex.namespace), activity


def _lock_pending_activity(ex: WorkflowExecution, scheduled_event_id: int) -> PendingActivity | None:
    with store.bound_cursor() as cursor:
        cursor.execute(_LOCK_ACTIVITY_SQL, [ex.run_id, ex.shard_id, scheduled_event_id])
        row = cursor.fetchone()
    return store.load(PendingActivity, row)[0] if row is not None else None


# One fixed statement, bound and prepared: every activity report locks its row.
_LOCK_ACTIVITY_SQL = (
    f"SELECT {store.select_list(PendingActivity, 'a')} FROM {PendingActivity._meta.db_table} a "
    "WHERE a.run_id = %s AND a.shard_id = %s AND a.scheduled_event_id = %s FOR UPDATE"
)


def close_activity(
    m: ExecutionMutation, activity: PendingActivity, event_type: str, attrs: dict[str, Any]
) -> None:
    """Write the late ActivityTaskStarted and the close event; wake the workflow."""
    if activity.state == ActivityState.STARTED:
        m.add_outside_event(
            EventType.ACTIVITY_TASK_STARTED,
            {
                "scheduled_event_id": activity.scheduled_event_id,
                "identity": activity.started_identity,
                "request_id": activity.started_request_id,
                "attempt": activity.attempt,
                "last_failure": activity.last_failure,
            },
            schedule_task=False,
        )
        started: Any = PREVIOUS_EVENT
    else:
        started = 0
    m.add_outside_event(
        event_type,
        {"scheduled_event_id": activity.scheduled_event_id, "started_event_id": started, **attrs},
    )
    m.drop_activity(activity)


def _finish(m: ExecutionMutation, wanted: WorkflowTaskWanted | None = None) -> WorkflowTaskResponse | None:
    """Save; with a worker's offer, start the next workflow task for it and return it."""
    handing_back = handoff.start_if_wanted(m, wanted)
    m.save()
    crash_point("before_commit")
    return handoff.handed_back_task(m) if handing_back else None


def respond_activity_task_completed(
    *,
    scope: tokens.TaskScope,
    task_token: str,
    result: Any,
    identity: str = "",
    wanted: WorkflowTaskWanted | None = None,
) -> WorkflowTaskResponse | None:
    """Close the activity with its result; return the run's next workflow task if the
    completing worker offered to take it (``wanted``, see :mod:`history.kernel.handoff`)."""
    token = tokens.decode(task_token, "act")
    with transaction.atomic(durable=True):
        m, activity = lock_activity(token, scope)
        try:
            check_payload(m.namespace, result, "activity result")
        except ChronicleError as exc:
            failure = {
                "message": exc.message,
                "source": "server",
                "non_retryable": True,
                "server_failure_info": {"non_retryable": True},
            }
            close_activity(
                m,
                activity,
                EventType.ACTIVITY_TASK_FAILED,
                {
                    "failure": failure,
                    "identity": identity,
                    "retry_state": "RETRY_STATE_NON_RETRYABLE_FAILURE",
                },
            )
        else:
            close_activity(
                m, activity, EventType.ACTIVITY_TASK_COMPLETED, {"result": result, "identity": identity}
            )
        handed = _finish(m, wanted)
    crash_point("after_commit_before_reply")
    return handed


def fail_attempt(
    m: ExecutionMutation,
    activity: PendingActivity,
    failure: dict[str, Any],
    identity: str,
    *,
    timeout_type: str = "",
) -> None:
    """Retry the attempt per its policy, or write the final failure or timeout."""
    expiration = (
        activity.first_scheduled_time + timedelta(seconds=activity.schedule_to_close_timeout)
        if activity.schedule_to_close_timeout
        else None
    )
    decision = decide_retry(
        activity.retry_policy,
        attempt=activity.attempt,
        failure=failure,
        now=m.now,
        expiration=expiration,
    )
    if decision.retry:
        activity.attempt += 1
        activity.last_failure = _trim_failure(failure)
        activity.last_worker_identity = identity
        activity.state = ActivityState.SCHEDULED
        activity.started_time = None
        activity.scheduled_time = m.now + timedelta(seconds=decision.delay)
        retried = [
            "attempt",
            "last_failure",
            "last_worker_identity",
            "state",
            "started_time",
            "scheduled_time",
            "heartbeat_details",  # a failure may carry the last ones
        ]
        save_activity_fields(activity, retried)
        m.add_timer(
            TimerKind.ACTIVITY_RETRY,
            activity.scheduled_time,
            scheduled_event_id=activity.scheduled_event_id,
            attempt=activity.attempt,
        )
        m.notify_history()
        return
    if timeout_type:
        close_activity(
            m,
            activity,
            EventType.ACTIVITY_TASK_TIMED_OUT,
            {"failure": failure, "retry_state": decision.retry_state},
        )
    else:
        close_activity(
            m,
            activity,
            EventType.ACTIVITY_TASK_FAILED,
            {"failure": failure, "identity": identity, "retry_state": decision.retry_state},
        )


def _trim_failure(failure: dict[str, Any]) -> dict[str, Any]:
    """Failures kept in mutable state are cut to 4 KiB (Temporal's limit)."""
    message = str(failure.get("message", ""))
    if len(message) > 4096:
        return {**failure, "message": message[:4096], "stack_trace": ""}
    return failure


def respond_activity_task_failed(
    *,
    scope: tokens.TaskScope,
    task_token: str,
    failure: dict[str, Any],
    identity: str = "",
    last_heartbeat_details: Any = None,
    wanted: WorkflowTaskWanted | None = None,
) -> WorkflowTaskResponse | None:
    """Fail the attempt: retried per its policy, or the activity's final failure. Return
    the run's next workflow task if the worker offered to take it (see ``handoff``)."""
    token = tokens.decode(task_token, "act")
    if not isinstance(failure, dict):
        raise invalid("failure must be an object")
    with transaction.atomic(durable=True):
        m, activity = lock_activity(token, scope)
        check_payload(m.namespace, failure, "failure")
        if last_heartbeat_details is not None:
            activity.heartbeat_details = last_heartbeat_details
        fail_attempt(m, activity, failure, identity)
        return _finish(m, wanted)


def respond_activity_task_canceled(
    *, scope: tokens.TaskScope, task_token: str, details: Any = None, identity: str = ""
) -> None:
    token = tokens.decode(task_token, "act")
    with transaction.atomic(durable=True):
        m, activity = lock_activity(token, scope)
        if not activity.cancel_requested_event_id:
            raise invalid("the activity has no cancel request")
        close_activity(
            m,
            activity,
            EventType.ACTIVITY_TASK_CANCELED,
            {
                "details": details,
                "identity": identity,
                "latest_cancel_requested_event_id": activity.cancel_requested_event_id,
            },
        )
        _finish(m)


def record_activity_task_heartbeat(*, scope: tokens.TaskScope, task_token: str, details: Any = None) -> bool:
    """Keep the details and time; return whether cancellation was requested."""
    token = tokens.decode(task_token, "act")
    with transaction.atomic(durable=True):
        m, activity = lock_activity(token, scope)
        check_payload(m.namespace, details, "heartbeat details")
        activity.heartbeat_details = details
        activity.last_heartbeat_time = m.now
        save_activity_fields(activity, ["heartbeat_details", "last_heartbeat_time"])
        return activity.cancel_requested_event_id != 0
