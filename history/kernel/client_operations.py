"""Client operations on a run: signal, request cancel, terminate, and creating a query.

Each changes the run through :func:`change_run`, which locks it by its identity and
writes through the unit of work; the shard owner's duties (a signal, cancel request or
terminate one workflow asks of another: ``history.kernel.transfers``) go through it too.
The ``_txn`` variants do their part on a run the caller has locked already (a start that
terminates the running run, a schedule, reset, a duty's change).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import transaction

from chronicle.errors import ChronicleError, ErrorCode, invalid, not_found
from history import faults
from history.kernel._mutation import ExecutionMutation
from history.kernel.locks import lock_execution, lock_run, shard_for
from history.kernel.payloads import check_payload
from history.kernel.queries import enqueue_query_txn, release_buffered_queries_txn
from history.models import (
    ExecutionStatus,
    SignalRequest,
    WorkflowExecution,
    WorkflowQuery,
)
from history.vocabulary import EventType
from namespaces.models import Namespace

T = TypeVar("T")


def change_run(
    namespace: Namespace,
    workflow_id: str,
    run_id: str | uuid.UUID | None,
    change: Callable[[ExecutionMutation], T],
    *,
    running_only: bool,
    database_time: bool = False,
    before_commit: Callable[[], None] | None = None,
) -> T:
    """Make ``change`` to a run in its own transaction: lock, check, change, save.

    WorkflowNotRunning when the run closed and ``running_only``. ``database_time`` is the
    shard owner's duty: the owner's clock may be off, and the run's other events carry the
    frontends' and the owner's database times, so the change is stamped with the time its
    lock read. Only :func:`~history.kernel.locks.lock_run` reads that time, so the duty
    locks the run by its id (it always names one); the API calls lock by identity and
    keep their own clock. ``before_commit`` runs last inside the transaction.
    """
    with transaction.atomic(durable=True):
        execution = _lock(namespace, workflow_id, run_id, by_run_id=database_time)
        if running_only and not execution.is_running:
            raise ChronicleError(ErrorCode.WORKFLOW_NOT_RUNNING, "workflow execution already completed")
        # A run locked by id carries its namespace as the lock read it.
        owner = execution.namespace if database_time else namespace
        mutation = ExecutionMutation(execution, owner, database_time=database_time)
        result = change(mutation)
        mutation.save()
        if before_commit is not None:
            before_commit()
    return result


def _lock(
    namespace: Namespace, workflow_id: str, run_id: str | uuid.UUID | None, *, by_run_id: bool
) -> WorkflowExecution:
    """The run locked by its identity, or by its id on the identity's shard (NotFound
    either way when it is gone)."""
    if not by_run_id:
        return lock_execution(namespace, workflow_id, run_id)
    try:
        return lock_run(run_id or "", shard_for(namespace.id, workflow_id))
    except ChronicleError:
        raise not_found(f"workflow execution {workflow_id!r} not found") from None


def terminate_txn(mutation: ExecutionMutation, reason: str, details: Any, identity: str) -> None:
    """Close a locked, running run as terminated."""
    mutation.close(
        ExecutionStatus.TERMINATED,
        EventType.WORKFLOW_EXECUTION_TERMINATED,
        {"reason": reason, "details": details, "identity": identity},
    )
    release_buffered_queries_txn(mutation)


def apply_signal(
    mutation: ExecutionMutation,
    name: str,
    signal_input: list[Any],
    request_id: str,
    *,
    identity: str,
    external: dict[str, Any] | None = None,
) -> None:
    ex = mutation.execution
    if request_id:
        if SignalRequest.objects.filter(run=ex, shard_id=ex.shard_id, request_id=request_id).exists():
            return
        SignalRequest.objects.create(run=ex, shard_id=ex.shard_id, request_id=request_id)
    if ex.signal_count >= mutation.namespace.max_signals_per_execution:
        raise ChronicleError(
            ErrorCode.LIMIT_EXCEEDED,
            f"run has reached {mutation.namespace.max_signals_per_execution} signals",
        )
    ex.signal_count += 1
    mutation.add_outside_event(
        EventType.WORKFLOW_EXECUTION_SIGNALED,
        {
            "signal_name": name,
            "input": signal_input,
            "identity": identity,
            "request_id": request_id,
            **(external or {}),
        },
        schedule_task=ex.wft_backoff_until is None,
    )


def signal_workflow_execution(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    signal_name: str,
    input: list[Any],
    request_id: str = "",
    identity: str = "",
    external: dict[str, Any] | None = None,
) -> None:
    """Signal a running run; ``external`` names the sending workflow when one sent it."""
    if not signal_name or len(signal_name) > 1000:
        raise invalid("signal_name must be 1 to 1000 characters")
    check_payload(namespace, input, "signal input")

    def change(mutation: ExecutionMutation) -> None:
        apply_signal(mutation, signal_name, input, request_id, identity=identity, external=external)

    # faults: both calls are no-ops unless the fault harness plants its bug (history.faults).
    with faults.answered_regardless():
        change_run(
            namespace, workflow_id, run_id, change, running_only=True, before_commit=faults.planted_rollback
        )


def request_cancel_workflow_execution(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    reason: str = "",
    identity: str = "",
    external: dict[str, Any] | None = None,
) -> None:
    """Ask the workflow to cancel; a no-op on a closed or already-cancelling run.

    ``external`` names the requesting workflow and its Initiated event when one asked.
    """

    def change(mutation: ExecutionMutation) -> None:
        request_cancel_txn(mutation, reason=reason, identity=identity, external=external)

    change_run(namespace, workflow_id, run_id, change, running_only=False)


def request_cancel_txn(
    mutation: ExecutionMutation, *, reason: str, identity: str, external: dict[str, Any] | None = None
) -> None:
    """Record a cancel request on a locked run; a no-op on a closed or already-cancelling run."""
    execution = mutation.execution
    if not execution.is_running or execution.cancel_requested:
        return
    execution.cancel_requested = True
    mutation.add_outside_event(
        EventType.WORKFLOW_EXECUTION_CANCEL_REQUESTED,
        {"cause": reason, "identity": identity, **(external or {})},
    )


def terminate_workflow_execution(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    reason: str = "",
    details: Any = None,
    identity: str = "",
) -> None:
    """Close the run at once; NotFound on a closed run (Temporal's rule)."""

    def change(mutation: ExecutionMutation) -> None:
        terminate_txn(mutation, reason, details, identity)

    change_run(namespace, workflow_id, run_id, change, running_only=True)


def create_query(
    namespace: Namespace,
    *,
    workflow_id: str,
    run_id: str | None,
    query_type: str,
    query_args: list[Any],
) -> WorkflowQuery:
    """Buffer the query for the next workflow task, or queue a query task; no history."""
    check_payload(namespace, query_args, "query args")

    def change(mutation: ExecutionMutation) -> WorkflowQuery:
        execution = mutation.execution
        query = WorkflowQuery.objects.create(
            run=execution, shard_id=execution.shard_id, query_type=query_type, query_args=query_args
        )
        enqueue_query_txn(mutation, query)
        return query

    return change_run(namespace, workflow_id, run_id, change, running_only=False)
