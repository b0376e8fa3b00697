"""The write: a reset creates a new run from the plan and terminates the current one.

The new run gets events ``1 .. point-1`` of the base run, a synthetic
``WorkflowTaskStarted`` if the task at that point never started, a ``WorkflowTaskFailed``
with cause ``RESET_WORKFLOW`` naming the reason and both runs, the signals and updates
recorded after the point (unless asked otherwise, :mod:`~history.kernel.reset.reapply`) and
a new workflow task; its pending work is restored from the fold. All in one durable
transaction.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction

from chronicle import clock
from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.faults import crash_point
from history.kernel._mutation import ExecutionMutation
from history.kernel.activity_tasks import restore_activity_txn
from history.kernel.children import restore_child, restore_external_request
from history.kernel.client_operations import terminate_txn
from history.kernel.locks import shard_for
from history.kernel.reset.fold import ReplayedState
from history.kernel.reset.plan import ResetPlan, base_and_current, plan_reset
from history.kernel.reset.points import RESET_CAUSE, ResetPoint
from history.kernel.reset.reapply import reapply_updates_txn, restore_updates_txn
from history.kernel.start import arm_workflow_timeouts
from history.kernel.transfers import child_close_event
from history.kernel.versioning import current_build_id
from history.models import (
    ExecutionStatus,
    HistoryEvent,
    PendingActivity,
    PendingChildExecution,
    SignalRequest,
    TimerKind,
    WorkflowExecution,
)
from history.vocabulary import EventType
from namespaces.models import Namespace

RESETTER_IDENTITY = "history-resetter"


def reset_workflow_execution(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    point: ResetPoint,
    reason: str,
    reapply_signals: bool = True,
    reapply_updates: bool = True,
    request_id: str = "",
    identity: str = "",
) -> str:
    """Reset the run (the current one unless ``run_id``) to ``point``; return the new run's id.

    Signals and updates recorded after the point go to the new run again unless
    ``reapply_signals`` or ``reapply_updates`` is false (see :func:`reapply_choice`).
    A retried request with the same ``request_id`` returns the run the first one made.
    """
    if not reason.strip():
        raise invalid("reason is required")
    try:
        with transaction.atomic(durable=True):
            base, current = base_and_current(namespace, workflow_id, run_id, lock=True)
            if request_id and current.create_request_id == request_id:
                return str(current.run_id)
            plan = plan_reset(
                base, current, point, reapply_signals=reapply_signals, reapply_updates=reapply_updates
            )
            new_run_id = _reset_txn(namespace, plan, reason=reason, request_id=request_id, identity=identity)
            crash_point("before_commit")
    except IntegrityError:
        raise ChronicleError(
            ErrorCode.CONFLICT, "another run of this workflow id started during the reset; retry"
        ) from None
    crash_point("after_commit_before_reply")
    return new_run_id


def _reset_txn(namespace: Namespace, plan: ResetPlan, *, reason: str, request_id: str, identity: str) -> str:
    now = clock.now()
    new = _new_run(plan, now, request_id)
    terminated = plan.current.is_running
    if terminated:
        ending = ExecutionMutation(plan.current, namespace)
        plan.current.reset_run_id = new.run_id
        terminate_txn(ending, reason, None, RESETTER_IDENTITY)
        ending.save()
    if not terminated or plan.base.run_id != plan.current.run_id:
        WorkflowExecution.objects.filter(run_id=plan.base.run_id, shard_id=plan.base.shard_id).update(
            reset_run_id=new.run_id
        )
    # Foreign keys are checked at commit, so the copied events and restored rows may be
    # written before the new run's row, which the mutation inserts when it saves.
    new.history_size_bytes = _copy_events(plan, new)
    mutation = ExecutionMutation(new, namespace)
    mutation.now = now
    _fail_reset_task(mutation, plan, reason)
    _restore_pending(mutation, plan.state)
    _restore_children(mutation, plan.state)
    _reapply_signals(mutation, plan, identity)
    reapply_updates_txn(mutation, plan, restore_updates_txn(mutation, plan))
    _report_children_closed_meanwhile(mutation)
    mutation.schedule_workflow_task()
    arm_workflow_timeouts(mutation)
    mutation.save()
    return str(new.run_id)


_NOT_COPIED = {
    "run_id",
    "status",
    "next_event_id",
    "history_size_bytes",
    "start_time",
    "execution_time",
    "close_time",
    "execution_expiration_time",
    "result",
    "failure",
    "create_request_id",
    "new_run_id",
    "signal_count",
    "cancel_requested",
    "buffered_events",
    "search_attributes",
    "sticky_task_queue",
    "reset_base_run_id",
    "reset_event_id",
    "reset_run_id",
    "assigned_build_id",
    "updates_in_flight",
}


def _new_run(plan: ResetPlan, now: datetime, request_id: str) -> WorkflowExecution:
    """The reset run's row: the base's settings, the replayed state, clocks from now."""
    base, state = plan.base, plan.state
    settings = {
        f.attname: getattr(base, f.attname)
        for f in WorkflowExecution._meta.concrete_fields
        if f.name not in _NOT_COPIED and not f.name.startswith("wft_") and not f.name.startswith("last_wft")
    }
    return WorkflowExecution(
        **settings,
        run_id=uuid.uuid4(),
        status=ExecutionStatus.RUNNING,
        next_event_id=plan.event_id,
        start_time=now,
        execution_time=now,
        execution_expiration_time=(
            now + timedelta(seconds=base.execution_timeout) if base.execution_timeout else None
        ),
        create_request_id=request_id or str(uuid.uuid4()),
        signal_count=state.signal_count,
        cancel_requested=state.cancel_requested,
        search_attributes=state.search_attributes,
        wft_scheduled_event_id=state.wft_scheduled_event_id,
        wft_started_event_id=state.wft_started_event_id,
        last_wft_started_event_id=state.last_wft_started_event_id,
        last_wft_completed_event_id=state.last_wft_completed_event_id,
        reset_base_run_id=base.run_id,
        reset_event_id=plan.event_id,
        # A reset is how a run leaves a bad build: it goes to the queue's current one.
        assigned_build_id=current_build_id(base.namespace, base.task_queue),
    )


def _copy_events(plan: ResetPlan, new: WorkflowExecution) -> int:
    """Copy events ``1 .. point-1`` server-side (the rows never travel through Python);
    return their size in bytes, the new run's starting history size.

    The size is PostgreSQL's text form of each event's attributes, a little above the
    compact JSON the kernel counts as it appends: the limits err on the safe side.
    """
    table = HistoryEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH copied AS (INSERT INTO {table} "
            "(run_id, shard_id, event_id, event_type, event_time, attributes) "
            f"SELECT %s, shard_id, event_id, event_type, event_time, attributes FROM {table} "
            "WHERE run_id = %s AND shard_id = %s AND event_id < %s "
            "RETURNING octet_length(attributes::text) + octet_length(event_type) AS size) "
            "SELECT coalesce(sum(size), 0) FROM copied",
            [new.run_id, plan.base.run_id, plan.base.shard_id, plan.event_id],
        )
        (size,) = cursor.fetchone() or (0,)
    SignalRequest.objects.bulk_create(
        [
            SignalRequest(run=new, shard_id=new.shard_id, request_id=r)
            for r in set(plan.state.signal_request_ids)
        ]
    )
    return int(size)


def _fail_reset_task(m: ExecutionMutation, plan: ResetPlan, reason: str) -> None:
    """Close the workflow task pending at the point as failed by the reset."""
    ex = m.execution
    if not ex.wft_started_event_id:
        ex.wft_started_event_id = m.append(
            EventType.WORKFLOW_TASK_STARTED,
            {
                "scheduled_event_id": ex.wft_scheduled_event_id,
                "identity": "history-service",
                "request_id": str(uuid.uuid4()),
                "history_size_bytes": ex.history_size_bytes,
            },
        )
    m.append(
        EventType.WORKFLOW_TASK_FAILED,
        {
            "scheduled_event_id": ex.wft_scheduled_event_id,
            "started_event_id": ex.wft_started_event_id,
            "cause": RESET_CAUSE,
            "failure": {"message": reason, "source": "server", "reset_workflow_failure_info": {}},
            "identity": "history-service",
            "base_run_id": str(plan.base.run_id),
            "new_run_id": str(ex.run_id),
            "fork_event_version": 0,
        },
    )
    m.clear_workflow_task()
    ex.wft_attempt = 1


def _restore_pending(m: ExecutionMutation, state: ReplayedState) -> None:
    """Activities pending at the point run again from now; timers keep their deadlines."""
    for scheduled, attrs in sorted(state.activities.items()):
        restore_activity_txn(m, scheduled, attrs)
    for scheduled, requested in state.activity_cancel_requests.items():
        PendingActivity.objects.filter(
            run=m.execution, shard_id=m.execution.shard_id, scheduled_event_id=scheduled
        ).update(cancel_requested_event_id=requested)
    for timer in state.timers.values():
        m.add_timer(
            TimerKind.USER_TIMER,
            timer.fire_at,
            timer_id=timer.timer_id,
            scheduled_event_id=timer.started_event_id,
        )


def _reapply_signals(m: ExecutionMutation, plan: ResetPlan, identity: str) -> None:
    for _, attrs in plan.signals:
        m.execution.signal_count += 1
        m.append(
            EventType.WORKFLOW_EXECUTION_SIGNALED,
            {
                "signal_name": attrs.get("signal_name", ""),
                "input": attrs.get("input") or [],
                "identity": attrs.get("identity") or identity,
                "request_id": attrs.get("request_id") or "",
            },
        )
        if attrs.get("request_id"):
            SignalRequest.objects.get_or_create(
                run=m.execution, shard_id=m.execution.shard_id, request_id=attrs["request_id"]
            )


def _restore_children(m: ExecutionMutation, state: ReplayedState) -> None:
    """Children in flight at the point stay this run's; requests without an outcome go again."""
    for child in sorted(state.children.values(), key=lambda c: c.initiated_event_id):
        started = (child.started_run_id, child.started_event_id) if child.started_run_id else None
        restore_child(m, child.initiated_event_id, child.request, started)
    for request in sorted(state.external_requests.values(), key=lambda r: r.initiated_event_id):
        restore_external_request(m, request.initiated_event_id, request.kind, request.attributes)


def _report_children_closed_meanwhile(m: ExecutionMutation) -> None:
    """A child taken over that has closed since (its report went to the base run) closes here now."""
    started = PendingChildExecution.objects.filter(
        run=m.execution, shard_id=m.execution.shard_id, started_run_id__isnull=False
    )
    for child in started.order_by("initiated_event_id"):
        closed = _closed_chain_end(m.namespace, child)
        if closed is not None:
            m.add_outside_event(*child_close_event(closed, child, m.namespace.name))
            started.filter(id=child.id).delete()


def _closed_chain_end(namespace: Namespace, child: PendingChildExecution) -> WorkflowExecution | None:
    """The run that closed the child's chain, or None while the chain is open (read on the
    child's shard, inside the reset's transaction: see docs/scale-out.md)."""
    assert child.started_run_id is not None
    chain = WorkflowExecution.objects.filter(
        namespace=namespace,
        workflow_id=child.workflow_id,
        shard_id=shard_for(namespace.id, child.workflow_id),
        first_run_id=child.started_run_id,
    )
    if chain.filter(status=ExecutionStatus.RUNNING).exists():
        return None
    ends = chain.filter(new_run_id__isnull=True, reset_run_id__isnull=True)
    return ends.exclude(status=ExecutionStatus.RUNNING).order_by("-close_time").first()
