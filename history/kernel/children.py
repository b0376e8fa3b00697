"""Child workflows and requests to other workflows: the commands and the parent's close duties.

A command writes only the run that issued it: its Initiated event, a pending row keyed
by the run, and a transfer row (a ``TimerTask`` due at once). The shard owner then
carries the change to the other execution in that execution's own transaction and
records the outcome back here (``history.kernel.transfers``), so no transaction writes
two shards.
"""

from __future__ import annotations

import uuid
from typing import Any

from history.kernel._mutation import ExecutionMutation
from history.kernel.command_checks import CommandRejected, require_name, require_seconds, type_name
from history.kernel.retry import normalize_retry_policy
from history.kernel.start import REUSE_POLICIES
from history.models import (
    ExternalRequestKind,
    PendingChildExecution,
    PendingExternalRequest,
    TimerKind,
)
from history.vocabulary import EventType

MAX_PENDING_EXTERNAL_REQUESTS = 2_000  # Temporal's limit.numPendingSignals / numPendingCancelRequests


def _enum(value: Any, prefix: str, allowed: set[str], default: str, cause: str) -> str:
    """Accept Temporal's full enum spelling or its short form; return the short form."""
    text = value or default
    if not isinstance(text, str):
        raise CommandRejected(cause, f"{prefix.lower()} must be a string")
    short = text.removeprefix(prefix)
    if short not in allowed:
        raise CommandRejected(cause, f"unknown {prefix.lower().rstrip('_')} {text!r}")
    return short


def _check_namespace(m: ExecutionMutation, attrs: dict[str, Any], cause: str) -> None:
    namespace = attrs.get("namespace")
    if namespace not in (None, "", m.namespace.name):
        raise CommandRejected(cause, "commands across namespaces are not enabled")


def start_child_workflow(m: ExecutionMutation, a: dict[str, Any], wtc: int) -> None:
    """StartChildWorkflowExecution → StartChildWorkflowExecutionInitiated and a start duty."""
    cause = "BAD_START_CHILD_EXECUTION_ATTRIBUTES"
    _check_namespace(m, a, cause)
    workflow_id = require_name(a, "workflow_id", cause)
    workflow_type = type_name(a.get("workflow_type"))
    if workflow_type is None:
        raise CommandRejected(cause, "workflow_type is required")
    queue = type_name(a.get("task_queue")) or m.execution.task_queue
    policy = "PARENT_CLOSE_POLICY_" + _enum(
        a.get("parent_close_policy"),
        "PARENT_CLOSE_POLICY_",
        {"TERMINATE", "ABANDON", "REQUEST_CANCEL"},
        "TERMINATE",
        cause,
    )
    reuse = _enum(
        a.get("workflow_id_reuse_policy"),
        "WORKFLOW_ID_REUSE_POLICY_",
        REUSE_POLICIES,
        "ALLOW_DUPLICATE",
        cause,
    )
    try:
        retry_policy = normalize_retry_policy(a["retry_policy"]) if a.get("retry_policy") else None
    except ValueError as exc:
        raise CommandRejected(cause, f"retry_policy: {exc}") from None
    children = PendingChildExecution.objects.filter(run=m.execution, shard_id=m.execution.shard_id)
    if children.count() >= m.namespace.max_pending_children:
        raise CommandRejected("PENDING_CHILD_WORKFLOWS_LIMIT_EXCEEDED", "too many pending child workflows")
    attributes = {
        "namespace": m.namespace.name,
        "workflow_id": workflow_id,
        "workflow_type": {"name": workflow_type},
        "task_queue": {"name": queue},
        "input": a.get("input") or [],
        "workflow_execution_timeout": require_seconds(a, "workflow_execution_timeout", cause),
        "workflow_run_timeout": require_seconds(a, "workflow_run_timeout", cause),
        "workflow_task_timeout": require_seconds(a, "workflow_task_timeout", cause),
        "parent_close_policy": policy,
        "control": a.get("control") or "",
        "workflow_task_completed_event_id": wtc,
        "workflow_id_reuse_policy": f"WORKFLOW_ID_REUSE_POLICY_{reuse}",
        "retry_policy": retry_policy,
        "header": a.get("header") or {},
        "memo": a.get("memo") or {},
        "search_attributes": a.get("search_attributes") or {},
    }
    initiated = m.append(EventType.START_CHILD_WORKFLOW_EXECUTION_INITIATED, attributes)
    PendingChildExecution.objects.create(
        run=m.execution,
        shard_id=m.execution.shard_id,
        initiated_event_id=initiated,
        workflow_id=workflow_id,
        workflow_type=workflow_type,
        request=attributes,
        parent_close_policy=policy,
    )
    m.add_timer(TimerKind.START_CHILD, m.now, scheduled_event_id=initiated)


def _target(a: dict[str, Any], cause: str) -> tuple[str, str]:
    execution = a.get("execution") or a.get("workflow_execution") or {}
    if not isinstance(execution, dict):
        raise CommandRejected(cause, "execution must be an object")
    workflow_id = require_name(execution, "workflow_id", cause)
    run_id = execution.get("run_id") or ""
    if not isinstance(run_id, str):
        raise CommandRejected(cause, "execution.run_id must be a string")
    return workflow_id, run_id


def _check_external_limit(m: ExecutionMutation, cause: str) -> None:
    requests = PendingExternalRequest.objects.filter(run=m.execution, shard_id=m.execution.shard_id)
    if requests.count() >= MAX_PENDING_EXTERNAL_REQUESTS:
        raise CommandRejected(cause, "too many pending requests to other workflows")


def signal_external_workflow(m: ExecutionMutation, a: dict[str, Any], wtc: int) -> None:
    """SignalExternalWorkflowExecution → SignalExternalWorkflowExecutionInitiated and a send duty."""
    cause = "BAD_SIGNAL_WORKFLOW_EXECUTION_ATTRIBUTES"
    _check_namespace(m, a, cause)
    workflow_id, run_id = _target(a, cause)
    signal_name = require_name(a, "signal_name", cause)
    _check_external_limit(m, "PENDING_SIGNALS_LIMIT_EXCEEDED")
    child_only = bool(a.get("child_workflow_only"))
    initiated = m.append(
        EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        {
            "namespace": m.namespace.name,
            "workflow_execution": {"workflow_id": workflow_id, "run_id": run_id},
            "signal_name": signal_name,
            "input": a.get("input") or [],
            "control": a.get("control") or "",
            "child_workflow_only": child_only,
            "header": a.get("header") or {},
            "workflow_task_completed_event_id": wtc,
        },
    )
    _pending_request(
        m,
        ExternalRequestKind.SIGNAL,
        initiated,
        workflow_id,
        run_id,
        child_only,
        signal_name=signal_name,
        input=a.get("input") or [],
        workflow_task_completed_event_id=wtc,
    )


def cancel_external_workflow(m: ExecutionMutation, a: dict[str, Any], wtc: int) -> None:
    """RequestCancelExternalWorkflowExecution → its Initiated event and a cancel duty."""
    cause = "BAD_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_ATTRIBUTES"
    _check_namespace(m, a, cause)
    workflow_id, run_id = _target(a, cause)
    _check_external_limit(m, "PENDING_REQUEST_CANCEL_LIMIT_EXCEEDED")
    child_only = bool(a.get("child_workflow_only"))
    reason = a.get("reason") or ""
    initiated = m.append(
        EventType.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        {
            "namespace": m.namespace.name,
            "workflow_execution": {"workflow_id": workflow_id, "run_id": run_id},
            "control": a.get("control") or "",
            "child_workflow_only": child_only,
            "reason": str(reason),
            "workflow_task_completed_event_id": wtc,
        },
    )
    _pending_request(
        m,
        ExternalRequestKind.CANCEL,
        initiated,
        workflow_id,
        run_id,
        child_only,
        reason=str(reason),
        workflow_task_completed_event_id=wtc,
    )


def _pending_request(
    m: ExecutionMutation,
    kind: str,
    initiated: int,
    workflow_id: str,
    run_id: str,
    child_only: bool,
    **fields: Any,
) -> None:
    PendingExternalRequest.objects.create(
        run=m.execution,
        shard_id=m.execution.shard_id,
        initiated_event_id=initiated,
        kind=kind,
        workflow_id=workflow_id,
        target_run_id=run_id,
        child_workflow_only=child_only,
        **fields,
    )
    timer_kind = (
        TimerKind.SIGNAL_EXTERNAL if kind == ExternalRequestKind.SIGNAL else TimerKind.CANCEL_EXTERNAL
    )
    m.add_timer(timer_kind, m.now, scheduled_event_id=initiated)


def restore_child(
    m: ExecutionMutation, initiated_event_id: int, request: dict[str, Any], started: tuple[str, int] | None
) -> None:
    """A reset run takes over a child initiated before its reset point.

    A child started by then stays this run's child (its close report follows the old
    parent's ``reset_run_id`` here); one not started yet gets its start duty again, and
    the start request id of the run that first initiated it keeps it from starting twice.
    """
    child = PendingChildExecution.objects.create(
        run=m.execution,
        shard_id=m.execution.shard_id,
        initiated_event_id=initiated_event_id,
        workflow_id=request["workflow_id"],
        workflow_type=request["workflow_type"]["name"],
        request=request,
        parent_close_policy=request["parent_close_policy"],
    )
    if started is None:
        m.add_timer(TimerKind.START_CHILD, m.now, scheduled_event_id=initiated_event_id)
        return
    child.started_run_id, child.started_event_id = uuid.UUID(started[0]), started[1]
    PendingChildExecution.objects.filter(id=child.id, shard_id=child.shard_id).update(
        started_run_id=child.started_run_id, started_event_id=child.started_event_id
    )


def restore_external_request(
    m: ExecutionMutation, initiated_event_id: int, kind: str, a: dict[str, Any]
) -> None:
    """A reset run sends again a signal or cancel whose outcome came after its reset point."""
    target = a.get("workflow_execution") or {}
    fields: dict[str, Any] = {
        "workflow_task_completed_event_id": a.get("workflow_task_completed_event_id") or 0
    }
    if kind == ExternalRequestKind.SIGNAL:
        fields |= {"signal_name": a.get("signal_name") or "", "input": a.get("input") or []}
    else:
        fields["reason"] = a.get("reason") or ""
    _pending_request(
        m,
        kind,
        initiated_event_id,
        str(target.get("workflow_id") or ""),
        str(target.get("run_id") or ""),
        bool(a.get("child_workflow_only")),
        **fields,
    )
