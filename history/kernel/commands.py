"""Workflow-task commands → events, as a table of small handlers (temporal-semantics §2)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from chronicle.errors import invalid
from history.cron import CronError, validate_cron
from history.kernel import children, store
from history.kernel._mutation import ExecutionMutation
from history.kernel.activity_tasks import (
    save_activity_fields,
    schedule_activity_txn,
    start_activity_txn,
)
from history.kernel.close import complete_workflow_txn, continue_as_new_txn, fail_workflow_txn
from history.kernel.command_checks import CommandRejected
from history.kernel.command_checks import require_name as _name
from history.kernel.command_checks import require_seconds as _seconds
from history.kernel.retry import normalize_retry_policy
from history.models import ActivityState, ExecutionStatus, PendingActivity, TimerKind, TimerTask
from history.vocabulary import CLOSE_COMMANDS, CommandType, EventType
from namespaces.search_attributes import (
    BadSearchAttributes,
    merge_search_attributes,
    normalize_search_attributes,
)

_CAN_CAUSE = "BAD_CONTINUE_AS_NEW_ATTRIBUTES"

MAX_COMMANDS = 1000


def validate_command_list(commands: Any) -> None:
    """Reject a malformed list outright (nothing written), as Temporal's frontend does."""
    if not isinstance(commands, list) or len(commands) > MAX_COMMANDS:
        raise invalid(f"commands must be a list of at most {MAX_COMMANDS}")
    for index, command in enumerate(commands):
        if not isinstance(command, dict) or command.get("command_type") not in HANDLERS:
            raise invalid(f"commands[{index}]: unknown command_type", known=sorted(HANDLERS))
        if not isinstance(command.get("attributes", {}), dict):
            raise invalid(f"commands[{index}].attributes must be an object")
        if command["command_type"] in CLOSE_COMMANDS and index != len(commands) - 1:
            raise invalid("a workflow-closing command must be the last command")


def apply_commands(
    mutation: ExecutionMutation,
    commands: list[dict[str, Any]],
    *,
    completed_event_id: int,
    identity: str,
) -> list[dict[str, Any]]:
    """Apply commands in order; return the activity tasks started eagerly."""
    eager: list[dict[str, Any]] = []
    for command in commands:
        attrs = command.get("attributes", {})
        result = HANDLERS[command["command_type"]](mutation, attrs, completed_event_id, identity)
        if result is not None:
            eager.append(result)
    return eager


def _schedule_activity(
    m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str
) -> dict[str, Any] | None:
    cause = "BAD_SCHEDULE_ACTIVITY_ATTRIBUTES"
    activity_id = _name(a, "activity_id", cause)
    activity_type = a.get("activity_type")
    type_name = activity_type.get("name") if isinstance(activity_type, dict) else activity_type
    if not isinstance(type_name, str) or not type_name:
        raise CommandRejected(cause, "activity_type is required")
    same_id, total = _pending_activities(m, activity_id)
    if same_id:
        raise CommandRejected("SCHEDULE_ACTIVITY_DUPLICATE_ID", f"activity_id {activity_id!r} is pending")
    if total >= m.namespace.max_pending_activities:
        raise CommandRejected("PENDING_ACTIVITIES_LIMIT_EXCEEDED", "too many pending activities")
    try:
        policy = normalize_retry_policy(a.get("retry_policy"))
    except ValueError as exc:
        raise CommandRejected(cause, f"retry_policy: {exc}") from None
    queue = a.get("task_queue")
    queue_name = (queue.get("name") if isinstance(queue, dict) else queue) or m.execution.task_queue
    try:
        activity = schedule_activity_txn(
            m,
            activity_id=activity_id,
            activity_type=type_name,
            task_queue=queue_name,
            input=a.get("input") or [],
            header=a.get("header") or {},
            retry_policy=policy,
            schedule_to_close=_seconds(a, "schedule_to_close_timeout", cause),
            schedule_to_start=_seconds(a, "schedule_to_start_timeout", cause),
            start_to_close=_seconds(a, "start_to_close_timeout", cause),
            heartbeat=_seconds(a, "heartbeat_timeout", cause),
            completed_event_id=wtc,
            dispatch=not (a.get("request_eager_execution") and queue_name == m.execution.task_queue),
        )
    except ValueError as exc:
        raise CommandRejected(cause, str(exc)) from None
    if a.get("request_eager_execution") and queue_name == m.execution.task_queue:
        return start_activity_txn(m, activity, identity=identity, request_id="eager")
    return None


_PENDING_ACTIVITIES_SQL = (
    f"SELECT count(*) FILTER (WHERE activity_id = %s), count(*) FROM {PendingActivity._meta.db_table} "
    "WHERE run_id = %s AND shard_id = %s"
)


def _pending_activities(m: ExecutionMutation, activity_id: str) -> tuple[int, int]:
    """How many of the run's pending activities have ``activity_id``, and how many there are,
    counting those scheduled earlier in this same completion (inserted with its write).
    One fixed statement: every scheduled activity pays for it."""
    with store.bound_cursor() as cursor:
        cursor.execute(_PENDING_ACTIVITIES_SQL, [activity_id, m.execution.run_id, m.execution.shard_id])
        same_id, total = cursor.fetchone()
    new = m.new_activities
    return same_id + sum(a.activity_id == activity_id for a in new), total + len(new)


def _request_cancel_activity(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    scheduled = a.get("scheduled_event_id")
    if not isinstance(scheduled, int) or isinstance(scheduled, bool):
        raise CommandRejected(
            "BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES", "scheduled_event_id must be an integer"
        )
    activity = m.new_activity(scheduled) or (
        PendingActivity.objects.filter(
            run=m.execution, shard_id=m.execution.shard_id, scheduled_event_id=scheduled
        ).first()
    )
    if activity is None:
        raise CommandRejected("BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES", f"no pending activity {scheduled}")
    cancel_activity_txn(m, activity, completed_event_id=wtc)


def cancel_activity_txn(m: ExecutionMutation, activity: PendingActivity, *, completed_event_id: int) -> None:
    """RequestCancelActivityTask: an unstarted activity is canceled in the same completion."""
    requested = m.append(
        EventType.ACTIVITY_TASK_CANCEL_REQUESTED,
        {
            "scheduled_event_id": activity.scheduled_event_id,
            "workflow_task_completed_event_id": completed_event_id,
        },
    )
    if activity.state == ActivityState.SCHEDULED:
        m.append(
            EventType.ACTIVITY_TASK_CANCELED,
            {
                "scheduled_event_id": activity.scheduled_event_id,
                "started_event_id": 0,
                "latest_cancel_requested_event_id": requested,
                "identity": "",
            },
        )
        m.drop_activity(activity)
        m.force_new_task = True
        return
    activity.cancel_requested_event_id = requested
    save_activity_fields(activity, ["cancel_requested_event_id"])


def _start_timer(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    timer_id = _name(a, "timer_id", "BAD_START_TIMER_ATTRIBUTES")
    delay = _seconds(a, "start_to_fire_timeout", "BAD_START_TIMER_ATTRIBUTES")
    if delay <= 0:
        raise CommandRejected("BAD_START_TIMER_ATTRIBUTES", "start_to_fire_timeout must be positive")
    if _timer_running(m, timer_id):
        raise CommandRejected("START_TIMER_DUPLICATE_ID", f"timer_id {timer_id!r} is running")
    started = m.append(
        EventType.TIMER_STARTED,
        {
            "timer_id": timer_id,
            "start_to_fire_timeout": delay,
            "workflow_task_completed_event_id": wtc,
        },
    )
    m.add_timer(
        TimerKind.USER_TIMER,
        m.now + timedelta(seconds=delay),
        timer_id=timer_id,
        scheduled_event_id=started,
    )


_RUNNING_TIMER = (
    f"SELECT 1 FROM {TimerTask._meta.db_table} "
    "WHERE run_id = %s AND shard_id = %s AND kind = %s AND timer_id = %s LIMIT 1"
)


def _timer_running(m: ExecutionMutation, timer_id: str) -> bool:
    """Whether the run has a user timer of this id running: one fixed statement (as an ORM
    query, compiling it cost more than running it, once per ``workflow.sleep``)."""
    ex = m.execution
    with store.bound_cursor() as cursor:
        cursor.execute(_RUNNING_TIMER, [ex.run_id, ex.shard_id, TimerKind.USER_TIMER.value, timer_id])
        return cursor.fetchone() is not None


def _cancel_timer(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    timer_id = _name(a, "timer_id", "BAD_CANCEL_TIMER_ATTRIBUTES")
    timers = TimerTask.objects.filter(
        run=m.execution, shard_id=m.execution.shard_id, kind=TimerKind.USER_TIMER, timer_id=timer_id
    )
    timer = timers.first()
    started_id = timer.scheduled_event_id if timer else None
    if timer is not None:
        timers.filter(id=timer.id).delete()
    else:
        # Fired while this task ran: its TimerFired is still buffered; drop it.
        def is_fired(event: dict[str, Any]) -> bool:
            return bool(
                event["event_type"] == EventType.TIMER_FIRED
                and event["attributes"].get("timer_id") == timer_id
            )

        fired = [e for e in m.execution.buffered_events if is_fired(e)]
        if not fired:
            raise CommandRejected("BAD_CANCEL_TIMER_ATTRIBUTES", f"no running timer {timer_id!r}")
        started_id = fired[0]["attributes"].get("started_event_id")
        m.drop_buffered(is_fired)
    m.append(
        EventType.TIMER_CANCELED,
        {
            "timer_id": timer_id,
            "started_event_id": started_id,
            "workflow_task_completed_event_id": wtc,
            "identity": identity,
        },
    )


def _record_marker(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    name = _name(a, "marker_name", "BAD_RECORD_MARKER_ATTRIBUTES")
    m.append(
        EventType.MARKER_RECORDED,
        {
            "marker_name": name,
            "details": a.get("details") or {},
            "header": a.get("header"),
            "failure": a.get("failure"),
            "workflow_task_completed_event_id": wtc,
        },
    )


def _checked_search_attributes(m: ExecutionMutation, a: dict[str, Any]) -> dict[str, Any]:
    """The command's search attributes typed by the namespace's registry, or the command refused.

    Temporal fails the workflow task with BAD_SEARCH_ATTRIBUTES for an unregistered name or
    a wrong-typed value in an upsert, a child start or a continue-as-new alike.
    """
    try:
        return normalize_search_attributes(m.namespace, a.get("search_attributes"))
    except BadSearchAttributes as exc:
        raise CommandRejected("BAD_SEARCH_ATTRIBUTES", str(exc)) from None


def _with_typed_search_attributes(m: ExecutionMutation, a: dict[str, Any]) -> dict[str, Any]:
    """A starting command's attributes with its search attributes checked and typed."""
    if not a.get("search_attributes"):
        return a
    return {**a, "search_attributes": merge_search_attributes({}, _checked_search_attributes(m, a))}


def _upsert_search_attributes(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    attrs = _checked_search_attributes(m, a)
    m.execution.search_attributes = merge_search_attributes(m.execution.search_attributes, attrs)
    m.append(
        "UpsertWorkflowSearchAttributes",
        {"search_attributes": attrs, "workflow_task_completed_event_id": wtc},
    )


def _complete(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    complete_workflow_txn(m, a.get("result"), completed_event_id=wtc)


def _fail(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    failure = a.get("failure") or {"message": "workflow failed"}
    if not isinstance(failure, dict):
        raise CommandRejected("BAD_FAIL_WORKFLOW_EXECUTION_ATTRIBUTES", "failure must be an object")
    fail_workflow_txn(m, failure, completed_event_id=wtc)


def _cancel(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    m.close(
        ExecutionStatus.CANCELED,
        EventType.WORKFLOW_EXECUTION_CANCELED,
        {"details": a.get("details"), "workflow_task_completed_event_id": wtc},
    )


def _start_child(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    children.start_child_workflow(m, _with_typed_search_attributes(m, a), wtc)


def _signal_external(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    children.signal_external_workflow(m, a, wtc)


def _cancel_external(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    children.cancel_external_workflow(m, a, wtc)


def _continue_as_new(m: ExecutionMutation, a: dict[str, Any], wtc: int, identity: str) -> None:
    _check_continue_as_new(a)
    continue_as_new_txn(m, _with_typed_search_attributes(m, a), completed_event_id=wtc)


def _check_continue_as_new(a: dict[str, Any]) -> None:
    """Refuse attributes of the wrong shape before any run is created."""
    for name in ("workflow_type", "task_queue"):
        value = a.get(name)
        if value is not None and not (isinstance(value, dict) and isinstance(value.get("name", ""), str)):
            raise CommandRejected(_CAN_CAUSE, f"{name} must be an object with a string name")
    for name, kind in (("input", list), ("memo", dict), ("search_attributes", dict), ("header", dict)):
        if a.get(name) is not None and not isinstance(a[name], kind):
            raise CommandRejected(_CAN_CAUSE, f"{name} must be a{'n object' if kind is dict else ' list'}")
    for name in ("workflow_run_timeout", "workflow_task_timeout", "backoff_start_interval"):
        _seconds(a, name, _CAN_CAUSE)
    if a.get("retry_policy") is not None:
        try:
            normalize_retry_policy(a["retry_policy"])
        except (ValueError, TypeError) as exc:
            raise CommandRejected(_CAN_CAUSE, f"retry_policy: {exc}") from None
    if a.get("cron_schedule"):
        try:
            validate_cron(str(a["cron_schedule"]))
        except CronError as exc:
            raise CommandRejected(_CAN_CAUSE, f"cron_schedule: {exc}") from None


Handler = Callable[[ExecutionMutation, dict[str, Any], int, str], dict[str, Any] | None]
HANDLERS: dict[str, Handler] = {
    CommandType.SCHEDULE_ACTIVITY_TASK: _schedule_activity,
    CommandType.REQUEST_CANCEL_ACTIVITY_TASK: _request_cancel_activity,
    CommandType.START_TIMER: _start_timer,
    CommandType.CANCEL_TIMER: _cancel_timer,
    CommandType.RECORD_MARKER: _record_marker,
    "UpsertWorkflowSearchAttributes": _upsert_search_attributes,
    CommandType.COMPLETE_WORKFLOW_EXECUTION: _complete,
    CommandType.FAIL_WORKFLOW_EXECUTION: _fail,
    CommandType.CANCEL_WORKFLOW_EXECUTION: _cancel,
    CommandType.CONTINUE_AS_NEW_WORKFLOW_EXECUTION: _continue_as_new,
    CommandType.START_CHILD_WORKFLOW_EXECUTION: _start_child,
    CommandType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION: _signal_external,
    CommandType.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION: _cancel_external,
}
