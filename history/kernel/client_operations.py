"""Client operations on a run: signal, request cancel, terminate, and creating a query.

Each locks the run by its identity (:func:`~history.kernel.locks.lock_execution`) and
writes through the unit of work; the ``_txn`` variants do their part on a run the
caller has locked already (a start that terminates the running run, a schedule, reset).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from chronicle.errors import ChronicleError, ErrorCode, invalid
from history import faults
from history.kernel._mutation import ExecutionMutation
from history.kernel.locks import lock_execution
from history.kernel.payloads import check_payload
from history.kernel.queries import enqueue_query_txn, release_buffered_queries_txn
from history.models import (
    ExecutionStatus,
    SignalRequest,
    WorkflowQuery,
)
from history.vocabulary import EventType
from namespaces.models import Namespace


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
    # faults: both calls are no-ops unless the fault harness plants its bug (history.faults).
    with faults.answered_regardless(), transaction.atomic(durable=True):
        execution = lock_execution(namespace, workflow_id, run_id)
        if not execution.is_running:
            raise ChronicleError(ErrorCode.WORKFLOW_NOT_RUNNING, "workflow execution already completed")
        mutation = ExecutionMutation(execution, namespace)
        apply_signal(mutation, signal_name, input, request_id, identity=identity, external=external)
        mutation.save()
        faults.planted_rollback()


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
    with transaction.atomic(durable=True):
        mutation = ExecutionMutation(lock_execution(namespace, workflow_id, run_id), namespace)
        request_cancel_txn(mutation, reason=reason, identity=identity, external=external)
        mutation.save()


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
    with transaction.atomic(durable=True):
        execution = lock_execution(namespace, workflow_id, run_id)
        if not execution.is_running:
            raise ChronicleError(ErrorCode.WORKFLOW_NOT_RUNNING, "workflow execution already completed")
        mutation = ExecutionMutation(execution, namespace)
        terminate_txn(mutation, reason, details, identity)
        mutation.save()


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
    with transaction.atomic(durable=True):
        execution = lock_execution(namespace, workflow_id, run_id)
        query = WorkflowQuery.objects.create(
            run=execution, shard_id=execution.shard_id, query_type=query_type, query_args=query_args
        )
        mutation = ExecutionMutation(execution, namespace)
        enqueue_query_txn(mutation, query)
        mutation.save()
    return query
