"""Transfer duties: changes one execution asks of another, carried by the shard owner.

A duty is a ``TimerTask`` row due at once on the asking run's shard. Carrying it takes
two transactions, never one across shards: first the change to the other execution
through its own kernel operation (made idempotent by a request id derived from the duty),
then, under the duty's shard fence, the outcome recorded on the asking run together with
the row's deletion. A crash between the two repeats the first harmlessly.
Each statement names its rows' shard: the duty's for the asking run, :func:`shard_for` of
the other's identity for the other (docs/scale-out.md). Every event a duty writes is
stamped by the database's clock, the time its run's lock read (a child's start: read in
its transaction), never by the owner's own clock, which may be off.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from chronicle import clock
from chronicle.errors import ChronicleError, ErrorCode
from history.kernel._mutation import ExecutionMutation
from history.kernel.client_operations import apply_signal, change_run, request_cancel_txn, terminate_txn
from history.kernel.locks import lock_run, shard_for
from history.kernel.start import ParentLink, StartRequest, start_workflow_execution
from history.kernel.timers import ShardFence, check_fence
from history.models import (
    ExecutionStatus,
    ExternalRequestKind,
    HistoryEvent,
    ParentClosePolicy,
    PendingChildExecution,
    PendingExternalRequest,
    TimerKind,
    TimerTask,
    WorkflowExecution,
)
from history.vocabulary import EventType

log = logging.getLogger("chronicle.transfers")

TRANSFER_KINDS = frozenset(
    {
        TimerKind.START_CHILD,
        TimerKind.CHILD_CLOSED,
        TimerKind.PARENT_CLOSE_POLICY,
        TimerKind.SIGNAL_EXTERNAL,
        TimerKind.CANCEL_EXTERNAL,
    }
)
RETRY_LATER = timedelta(milliseconds=200)
MAX_RESET_HOPS = 100  # resets of resets a close report follows to reach the parent's live run
NOT_FOUND = "EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND"


class NotYet(Exception):
    """The duty depends on an outcome not recorded yet: try again shortly."""


def _carrier(row: TimerTask) -> WorkflowExecution:
    """The run a transfer row belongs to (only schedule rows have none)."""
    assert row.run is not None, "transfer duties always belong to a run"
    return row.run


def _carrier_id(row: TimerTask) -> uuid.UUID:
    assert row.run_id is not None, "transfer duties always belong to a run"
    return row.run_id


def process_transfer(fence: ShardFence, timer_id: int) -> bool:
    """Carry one duty of the fenced shard; return whether it was done (False: gone or deferred)."""
    rows = TimerTask.objects.select_related("run__namespace").filter(shard_id=fence.shard_id)
    row = rows.filter(id=timer_id, run__shard_id=fence.shard_id).first()
    if row is None:
        return False
    try:
        _CARRIERS[TimerKind(row.kind)](fence, row)
    except NotYet:
        with transaction.atomic(durable=True):
            check_fence(fence)
            rows.filter(id=row.id).update(fire_at=clock.database_now() + RETRY_LATER)
        return False
    return True


def _record(fence: ShardFence, row: TimerTask, apply: Callable[[ExecutionMutation], None]) -> None:
    """Under the fence: lock the row's run, apply the outcome, delete the row; once only."""
    with transaction.atomic(durable=True):
        check_fence(fence)
        try:
            execution = lock_run(_carrier_id(row), row.shard_id)
        except ChronicleError:
            return  # retention deleted the run, and the row with it
        duty = TimerTask.objects.filter(id=row.id, shard_id=row.shard_id)
        if not duty.select_for_update().exists():
            return
        mutation = ExecutionMutation(execution, execution.namespace, database_time=True)
        apply(mutation)
        duty.delete()
        mutation.save()


def _execution_ref(workflow_id: str, run_id: str) -> dict[str, str]:
    return {"workflow_id": workflow_id, "run_id": run_id}


def _reset_ancestry(run: WorkflowExecution) -> list[tuple[uuid.UUID, int]]:
    """``run`` and the runs it was reset from, each with the event id its successor copied below."""
    lineage = [(run.run_id, 1 << 62)]
    base_id, below = run.reset_base_run_id, run.reset_event_id
    while base_id is not None and len(lineage) < MAX_RESET_HOPS:
        lineage.append((base_id, below))
        base = WorkflowExecution.objects.filter(run_id=base_id, shard_id=run.shard_id)  # a reset keeps the id
        found = base.values("reset_base_run_id", "reset_event_id").first()
        if found is None:
            break
        base_id, below = found["reset_base_run_id"], min(below, found["reset_event_id"])
    return lineage


def duty_request_id(run: WorkflowExecution, initiated_event_id: int) -> str:
    """The request id a duty sends with: the same for a reset run as for the run it copied."""
    return f"{origin_run_id(run, initiated_event_id)}:{initiated_event_id}"


def origin_run_id(run: WorkflowExecution, event_id: int) -> uuid.UUID:
    """The run that first wrote ``event_id``: a reset copies events, and their duties keep its ids.

    Request ids derived from the origin make a re-issued duty of a reset run land on
    what the base run already did (the child it started, the signal it sent) once only.
    """
    origin = run.run_id
    for run_id, copied_below in _reset_ancestry(run):
        if event_id >= copied_below:
            break
        origin = run_id
    return origin


# -- starting a child ---------------------------------------------------------------------


def _start_child(fence: ShardFence, row: TimerTask) -> None:
    parent = _carrier(row)
    child = _children(parent).filter(initiated_event_id=row.scheduled_event_id).first()
    if child is None or (not parent.is_running and child.started_run_id is None):
        _record(fence, row, lambda m: _forget_child(m, row.scheduled_event_id))
        return
    run_id, cause = _start_child_run(parent, child)
    _record(fence, row, lambda m: _child_start_outcome(m, row.scheduled_event_id, run_id, cause))


def _start_child_run(parent: WorkflowExecution, child: PendingChildExecution) -> tuple[str, str]:
    """Start the child in its own transaction; return (run id, "") or ("", failure cause)."""
    a = child.request
    request_id = duty_request_id(parent, child.initiated_event_id)
    already = WorkflowExecution.objects.filter(
        namespace=parent.namespace,
        workflow_id=child.workflow_id,
        shard_id=shard_for(parent.namespace_id, child.workflow_id),
        create_request_id=request_id,
    ).first()
    if already is not None:
        return str(already.first_run_id), ""  # started before a reset of the parent
    request = StartRequest(
        workflow_id=child.workflow_id,
        workflow_type=child.workflow_type,
        task_queue=a["task_queue"]["name"],
        input=a.get("input") or [],
        request_id=request_id,
        id_reuse_policy=a["workflow_id_reuse_policy"].removeprefix("WORKFLOW_ID_REUSE_POLICY_"),
        execution_timeout=a.get("workflow_execution_timeout") or 0.0,
        run_timeout=a.get("workflow_run_timeout") or 0.0,
        task_timeout=a.get("workflow_task_timeout") or parent.task_timeout,
        memo=a.get("memo") or {},
        search_attributes=a.get("search_attributes") or {},
        retry_policy=a.get("retry_policy"),
        identity=f"parent {parent.workflow_id}",
        parent=ParentLink(
            namespace=parent.namespace.name,
            workflow_id=parent.workflow_id,
            run_id=str(parent.run_id),
            initiated_event_id=child.initiated_event_id,
        ),
    )
    try:
        return start_workflow_execution(parent.namespace, request, database_time=True).run_id, ""
    except ChronicleError as exc:
        if exc.code != ErrorCode.WORKFLOW_ALREADY_STARTED:
            raise
        return "", "START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_WORKFLOW_ALREADY_EXISTS"


def _children(run: WorkflowExecution) -> QuerySet[PendingChildExecution]:
    """The run's pending children (on its shard)."""
    return PendingChildExecution.objects.filter(run=run, shard_id=run.shard_id)


def _forget_child(m: ExecutionMutation, initiated_event_id: int) -> None:
    _children(m.execution).filter(initiated_event_id=initiated_event_id).delete()


def _child_start_outcome(m: ExecutionMutation, initiated_event_id: int, run_id: str, cause: str) -> None:
    rows = _children(m.execution).filter(initiated_event_id=initiated_event_id)
    child = rows.select_for_update().first()
    if child is None or child.started_run_id is not None:
        return  # forgotten, or this outcome is already recorded
    common = {
        "namespace": m.namespace.name,
        "initiated_event_id": initiated_event_id,
        "workflow_type": {"name": child.workflow_type},
    }
    if cause:
        rows.delete()
        if m.execution.is_running:
            m.add_outside_event(
                EventType.START_CHILD_WORKFLOW_EXECUTION_FAILED,
                {
                    **common,
                    "workflow_id": child.workflow_id,
                    "cause": cause,
                    "control": child.request.get("control", ""),
                    "workflow_task_completed_event_id": child.request["workflow_task_completed_event_id"],
                },
            )
        return
    child.started_run_id = uuid.UUID(run_id)
    if m.execution.is_running:
        child.started_event_id = m.add_outside_event(
            EventType.CHILD_WORKFLOW_EXECUTION_STARTED,
            {**common, "workflow_execution": _execution_ref(child.workflow_id, run_id), "header": {}},
        )
    elif child.parent_close_policy != ParentClosePolicy.ABANDON:
        # The parent closed while its child was starting: the child gets the close policy now.
        m.add_timer(TimerKind.PARENT_CLOSE_POLICY, m.now, scheduled_event_id=initiated_event_id)
    rows.update(started_run_id=child.started_run_id, started_event_id=child.started_event_id)


# -- a child closed -----------------------------------------------------------------------

_CHILD_CLOSE_EVENTS = {
    ExecutionStatus.COMPLETED: (EventType.CHILD_WORKFLOW_EXECUTION_COMPLETED, ("result",)),
    ExecutionStatus.FAILED: (EventType.CHILD_WORKFLOW_EXECUTION_FAILED, ("failure", "retry_state")),
    ExecutionStatus.CANCELED: (EventType.CHILD_WORKFLOW_EXECUTION_CANCELED, ("details",)),
    ExecutionStatus.TERMINATED: (EventType.CHILD_WORKFLOW_EXECUTION_TERMINATED, ()),
    ExecutionStatus.TIMED_OUT: (EventType.CHILD_WORKFLOW_EXECUTION_TIMED_OUT, ("retry_state",)),
}


def _child_closed(fence: ShardFence, row: TimerTask) -> None:
    """Report the closed child (the row's run) to its parent, then drop the row."""
    child_run = _carrier(row)
    if child_run.parent_run_id is not None:
        _report_to_parent(child_run)
    _record(fence, row, lambda m: None)


def _report_to_parent(child_run: WorkflowExecution) -> None:
    assert child_run.parent_run_id is not None
    close_event = _close_event(child_run)  # read first: the parent's transaction stays on its shard
    with transaction.atomic(durable=True):
        try:
            parent, child = _parent_awaiting(child_run, child_run.parent_run_id)
        except ChronicleError:
            return  # the parent is gone (retention)
        if child is None:
            # Already reported, abandoned, or the parent never recorded this start.
            unstarted = _children(parent).filter(workflow_id=child_run.workflow_id, started_run_id=None)
            if unstarted.exists():
                raise NotYet
            return
        if not parent.is_running:
            _children(parent).filter(id=child.id).delete()
            return
        if child.started_event_id == 0:
            raise NotYet  # ChildWorkflowExecutionStarted is still buffered in the parent
        mutation = ExecutionMutation(parent, parent.namespace, database_time=True)
        event = child_close_event(child_run, child, parent.namespace.name, close_event=close_event)
        mutation.add_outside_event(*event)
        _children(parent).filter(id=child.id).delete()
        mutation.save()


def _parent_awaiting(
    child_run: WorkflowExecution, parent_run_id: uuid.UUID
) -> tuple[WorkflowExecution, PendingChildExecution | None]:
    """Lock the parent run that awaits ``child_run``'s chain, following the parent's resets
    (each of the same workflow id, so on the same shard)."""
    assert child_run.parent_workflow_id is not None
    shard = shard_for(child_run.namespace_id, child_run.parent_workflow_id)
    for _ in range(MAX_RESET_HOPS):
        parent = lock_run(parent_run_id, shard)
        child = (
            _children(parent)
            .select_for_update()
            .filter(workflow_id=child_run.workflow_id, started_run_id=child_run.first_run_id)
            .first()
        )
        if child is not None or parent.is_running or parent.reset_run_id is None:
            return parent, child
        parent_run_id = parent.reset_run_id  # the reset run took the child over
    return parent, None


def _close_event(run: WorkflowExecution) -> HistoryEvent:
    """A closed run's close event (its last)."""
    return HistoryEvent.objects.get(run=run, shard_id=run.shard_id, event_id=run.next_event_id - 1)


def child_close_event(
    child_run: WorkflowExecution,
    child: PendingChildExecution,
    namespace: str,
    *,
    close_event: HistoryEvent | None = None,
) -> tuple[str, dict[str, Any]]:
    """The ``ChildWorkflowExecution{Completed|Failed|...}`` event the parent records for the
    closed child (from its close event, read here unless the caller read it already)."""
    close_event = close_event or _close_event(child_run)
    event_type, carried = _CHILD_CLOSE_EVENTS[ExecutionStatus(child_run.status)]
    return event_type, {
        **{name: close_event.attributes.get(name) for name in carried},
        "namespace": namespace,
        "workflow_execution": _execution_ref(child_run.workflow_id, str(child_run.run_id)),
        "workflow_type": {"name": child.workflow_type},
        "initiated_event_id": child.initiated_event_id,
        "started_event_id": child.started_event_id,
    }


# -- parent close policy ------------------------------------------------------------------


def _parent_close_policy(fence: ShardFence, row: TimerTask) -> None:
    """Terminate or cancel the closed parent's child (whichever run of its chain is open)."""
    parent = _carrier(row)
    child = _children(parent).filter(initiated_event_id=row.scheduled_event_id).first()
    if child is not None and child.started_run_id is not None:
        _apply_policy(parent, child)
    _record(fence, row, lambda m: _forget_child(m, row.scheduled_event_id))


def _apply_policy(parent: WorkflowExecution, child: PendingChildExecution) -> None:
    namespace = parent.namespace
    assert child.started_run_id is not None
    external = {
        "external_workflow_execution": _execution_ref(parent.workflow_id, str(parent.run_id)),
    }
    reason, identity = "by parent close policy", "history-service"
    terminate = child.parent_close_policy == ParentClosePolicy.TERMINATE

    def change(m: ExecutionMutation) -> None:
        if terminate:
            terminate_txn(m, reason, None, identity)
        else:
            request_cancel_txn(m, reason=reason, identity=identity, external=external)

    for _ in range(3):  # the child's chain may move on (continue-as-new) under us
        current = WorkflowExecution.objects.filter(
            namespace=namespace,
            workflow_id=child.workflow_id,
            shard_id=shard_for(namespace.id, child.workflow_id),
            first_run_id=child.started_run_id,
            status=ExecutionStatus.RUNNING,
        ).first()
        if current is None:
            return
        try:
            change_run(
                namespace,
                child.workflow_id,
                current.run_id,
                change,
                running_only=terminate,
                database_time=True,
            )
            return
        except ChronicleError as exc:
            if exc.code != ErrorCode.WORKFLOW_NOT_RUNNING:
                raise


# -- signals and cancellations to other workflows -----------------------------------------


def _external_request(fence: ShardFence, row: TimerTask) -> None:
    source = _carrier(row)
    request = PendingExternalRequest.objects.filter(
        run=source, shard_id=source.shard_id, initiated_event_id=row.scheduled_event_id
    ).first()
    if request is None or not source.is_running:
        _record(fence, row, lambda m: None)
        return
    cause = _deliver(source, request)
    _record(fence, row, lambda m: _external_outcome(m, request, cause))


def _deliver(source: WorkflowExecution, request: PendingExternalRequest) -> str:
    """Signal or cancel the target in its own transaction; return "" or the failure cause."""
    target = WorkflowExecution.objects.filter(
        namespace=source.namespace,
        workflow_id=request.workflow_id,
        shard_id=shard_for(source.namespace_id, request.workflow_id),
    )
    if request.target_run_id:
        run_id = _uuid_or_none(request.target_run_id)
        if run_id is None:
            return NOT_FOUND
        target = target.filter(run_id=run_id)
    current = target.order_by("-start_time").first()
    if current is None or not current.is_running:
        return NOT_FOUND
    if request.child_workflow_only and current.parent_run_id not in {
        run_id for run_id, _ in _reset_ancestry(source)
    }:
        return NOT_FOUND
    external = {
        "external_workflow_execution": _execution_ref(source.workflow_id, str(source.run_id)),
    }
    identity = f"workflow {source.workflow_id}"
    signal = request.kind == ExternalRequestKind.SIGNAL

    def change(m: ExecutionMutation) -> None:
        if signal:
            request_id = duty_request_id(source, request.initiated_event_id)
            apply_signal(
                m, request.signal_name, request.input, request_id, identity=identity, external=external
            )
        else:
            cancel_by = {**external, "external_initiated_event_id": request.initiated_event_id}
            request_cancel_txn(m, reason=request.reason, identity=identity, external=cancel_by)

    try:
        change_run(
            source.namespace,
            request.workflow_id,
            current.run_id,
            change,
            running_only=signal,
            database_time=True,
        )
    except ChronicleError as exc:
        if exc.code == ErrorCode.LIMIT_EXCEEDED:
            return "SIGNAL_COUNT_LIMIT_EXCEEDED"
        if exc.code in (ErrorCode.NOT_FOUND, ErrorCode.WORKFLOW_NOT_RUNNING):
            return NOT_FOUND
        raise
    return ""


def _uuid_or_none(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _external_outcome(m: ExecutionMutation, request: PendingExternalRequest, cause: str) -> None:
    gone = PendingExternalRequest.objects.filter(id=request.id, shard_id=request.shard_id).delete()[0]
    if not gone or not m.execution.is_running:
        return
    signal = request.kind == ExternalRequestKind.SIGNAL
    attributes: dict[str, Any] = {
        "initiated_event_id": request.initiated_event_id,
        "namespace": m.namespace.name,
        "workflow_execution": _execution_ref(request.workflow_id, request.target_run_id),
    }
    if cause:
        event_type = (
            EventType.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED
            if signal
            else EventType.REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED
        )
        attributes["cause"] = (
            f"{'SIGNAL' if signal else 'CANCEL'}_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_{cause}"
        )
        attributes["workflow_task_completed_event_id"] = request.workflow_task_completed_event_id
    else:
        event_type = (
            EventType.EXTERNAL_WORKFLOW_EXECUTION_SIGNALED
            if signal
            else EventType.EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED
        )
    m.add_outside_event(event_type, attributes)


_CARRIERS: dict[TimerKind, Callable[[ShardFence, TimerTask], None]] = {
    TimerKind.START_CHILD: _start_child,
    TimerKind.CHILD_CLOSED: _child_closed,
    TimerKind.PARENT_CLOSE_POLICY: _parent_close_policy,
    TimerKind.SIGNAL_EXTERNAL: _external_request,
    TimerKind.CANCEL_EXTERNAL: _external_request,
}
