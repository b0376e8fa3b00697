"""How a run closes: complete, fail, time out, continue-as-new, and what follows a close.

A close that carries on creates the chain's next run as a follower, saved after the
closing run: a continue-as-new, a workflow retry (temporal-semantics §8: only with a
retry policy, never after cancel or terminate) or a cron run's successor. What a close
leaves behind (pending work dropped, children's duties) is :mod:`history.kernel.closing`.
Terminate, a client's close, is in :mod:`history.kernel.client_operations`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from history.cron import cron_backoff_seconds
from history.kernel._mutation import ExecutionMutation
from history.kernel.queries import release_buffered_queries_txn
from history.kernel.retry import decide_retry, normalize_retry_policy
from history.kernel.start import StartRequest, create_run
from history.models import (
    ExecutionStatus,
    WorkflowExecution,
)
from history.vocabulary import EventType


def continue_as_new_txn(
    mutation: ExecutionMutation, attrs: dict[str, Any], *, completed_event_id: int
) -> None:
    """Close the run as ContinuedAsNew and create the next run of the chain (temporal-semantics §8).

    Type, queue and the run and task timeouts default to the current run's; input, header,
    memo, search attributes, retry policy and cron schedule come from the command alone (the
    SDK fills them from the current run); the execution expiration is always kept.
    """
    ex = mutation.execution
    header = attrs.get("header") or {}
    requested_backoff = float(attrs.get("backoff_start_interval") or 0)
    req = StartRequest(
        workflow_id=ex.workflow_id,
        workflow_type=(attrs.get("workflow_type") or {}).get("name") or ex.workflow_type,
        task_queue=(attrs.get("task_queue") or {}).get("name") or ex.task_queue,
        input=attrs.get("input") or [],
        run_timeout=float(attrs.get("workflow_run_timeout") or ex.run_timeout),
        task_timeout=float(attrs.get("workflow_task_timeout") or ex.task_timeout),
        execution_timeout=ex.execution_timeout,
        memo=attrs.get("memo") or {},
        search_attributes=attrs.get("search_attributes") or {},
        retry_policy=attrs.get("retry_policy"),
        cron_schedule=attrs.get("cron_schedule") or "",
        start_delay=_continue_as_new_backoff(mutation, requested_backoff),
    )
    new = _start_follower(
        mutation,
        req,
        attempt=1,
        extra_start_attrs={"initiator": "WORKFLOW", "header": header},
        last_completion_result=attrs.get("last_completion_result", ex.last_completion_result),
    )
    mutation.close(
        ExecutionStatus.CONTINUED_AS_NEW,
        EventType.WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
        {
            "new_execution_run_id": str(new.run_id),
            "workflow_type": {"name": req.workflow_type},
            "task_queue": {"name": req.task_queue},
            "input": req.input,
            "workflow_run_timeout": req.run_timeout,
            "workflow_task_timeout": req.task_timeout,
            "backoff_start_interval": requested_backoff,
            "initiator": "WORKFLOW",
            "header": header,
            "memo": req.memo,
            "search_attributes": req.search_attributes,
            "last_completion_result": new.last_completion_result,
            "workflow_task_completed_event_id": completed_event_id,
        },
    )


def _continue_as_new_backoff(mutation: ExecutionMutation, requested: float) -> float:
    """Runs of one workflow id start at least the namespace's minimal interval apart.

    Temporal's guard against a tight continue-as-new loop: a run that lived less than
    the interval has the next run's first workflow task held back for the difference.
    """
    lifetime = (mutation.now - mutation.execution.execution_time).total_seconds()
    minimum = mutation.namespace.workflow_id_reuse_minimal_interval
    if lifetime + requested < minimum:
        return round(minimum - lifetime, 3)
    return requested


def complete_workflow_txn(mutation: ExecutionMutation, result: Any, *, completed_event_id: int) -> None:
    """Close the run as completed; a cron run starts the chain's next run."""
    ex = mutation.execution
    ex.result = result
    new_run_id = _next_cron_run(mutation, result=result, failure=None)
    mutation.close(
        ExecutionStatus.COMPLETED,
        EventType.WORKFLOW_EXECUTION_COMPLETED,
        {
            "result": result,
            "new_execution_run_id": new_run_id,
            "workflow_task_completed_event_id": completed_event_id,
        },
    )


def fail_workflow_txn(
    mutation: ExecutionMutation, failure: dict[str, Any], *, completed_event_id: int
) -> None:
    """Close the run as failed, starting its retry when the workflow's retry policy allows.

    A retry comes before cron: a cron run's next scheduled run starts only when no
    retry does.
    """
    mutation.execution.failure = failure
    retry_state, new_run_id = _retry_workflow(mutation, failure)
    if new_run_id is None:
        new_run_id = _next_cron_run(mutation, result=None, failure=failure)
    mutation.close(
        ExecutionStatus.FAILED,
        EventType.WORKFLOW_EXECUTION_FAILED,
        {
            "failure": failure,
            "retry_state": retry_state,
            "new_execution_run_id": new_run_id,
            "workflow_task_completed_event_id": completed_event_id,
        },
    )


def time_out_workflow_txn(mutation: ExecutionMutation, *, run_timeout: bool) -> None:
    """Close the run as timed out; a run timeout before the execution expires retries, then crons."""
    ex = mutation.execution
    failure = {"message": "workflow timed out", "timeout_failure_info": {"timeout_type": "START_TO_CLOSE"}}
    ex.failure = failure
    expired = ex.execution_expiration_time is not None and ex.execution_expiration_time <= mutation.now
    retry_state, new_run_id = "RETRY_STATE_TIMEOUT", None
    if run_timeout and not expired:
        retry_state, new_run_id = _retry_workflow(mutation, failure)
        if new_run_id is None:
            new_run_id = _next_cron_run(mutation, result=None, failure=failure)
    mutation.close(
        ExecutionStatus.TIMED_OUT,
        EventType.WORKFLOW_EXECUTION_TIMED_OUT,
        {"retry_state": retry_state, "new_execution_run_id": new_run_id},
    )
    release_buffered_queries_txn(mutation)


def _retry_workflow(mutation: ExecutionMutation, failure: dict[str, Any]) -> tuple[str, str | None]:
    """Decide a workflow retry (none without a policy); on yes, create the next run as a follower.

    Return the ``retry_state`` for the close event and the new run's id, if any.
    """
    ex = mutation.execution
    if ex.retry_policy is None:
        return "RETRY_STATE_RETRY_POLICY_NOT_SET", None
    decision = decide_retry(
        normalize_retry_policy(ex.retry_policy),
        attempt=ex.attempt,
        failure=failure,
        now=mutation.now,
        expiration=ex.execution_expiration_time,
    )
    if not decision.retry:
        return decision.retry_state, None
    new = _start_follower(
        mutation,
        _same_options(ex, start_delay=decision.delay),
        attempt=ex.attempt + 1,
        extra_start_attrs={"initiator": "RETRY", "continued_failure": failure},
        last_completion_result=ex.last_completion_result,
    )
    return "RETRY_STATE_IN_PROGRESS", str(new.run_id)


def _next_cron_run(mutation: ExecutionMutation, *, result: Any, failure: dict[str, Any] | None) -> str | None:
    """Start a cron run's successor at the next cron time; None without a schedule.

    The next time follows this run's scheduled time, skipping times already past. The
    chain ends when that time would reach the execution expiration. A completed run
    hands its result on; a failed one hands on its failure and the last result before it.
    """
    ex = mutation.execution
    if not ex.cron_schedule:
        return None
    delay = cron_backoff_seconds(ex.cron_schedule, ex.execution_time, mutation.now)
    expiration = ex.execution_expiration_time
    if expiration is not None and mutation.now + timedelta(seconds=delay) >= expiration:
        return None
    last_result = result if failure is None else ex.last_completion_result
    new = _start_follower(
        mutation,
        _same_options(ex, start_delay=delay),
        attempt=1,
        extra_start_attrs={"initiator": "CRON_SCHEDULE", "continued_failure": failure},
        last_completion_result=last_result,
    )
    return str(new.run_id)


def _same_options(ex: WorkflowExecution, *, start_delay: float) -> StartRequest:
    """The current run's start options, for a retry or the next cron run."""
    return StartRequest(
        workflow_id=ex.workflow_id,
        workflow_type=ex.workflow_type,
        task_queue=ex.task_queue,
        input=ex.input,
        execution_timeout=ex.execution_timeout,
        run_timeout=ex.run_timeout,
        task_timeout=ex.task_timeout,
        memo=ex.memo,
        search_attributes=ex.search_attributes,
        retry_policy=ex.retry_policy,
        cron_schedule=ex.cron_schedule,
        start_delay=start_delay,
    )


def _start_follower(
    mutation: ExecutionMutation,
    req: StartRequest,
    *,
    attempt: int,
    extra_start_attrs: dict[str, Any],
    last_completion_result: Any,
) -> WorkflowExecution:
    """Create the chain's next run, linked both ways, saved after the current run closes.

    On the same task queue it stays on the run's build; on another it takes that queue's current one.
    """
    ex = mutation.execution
    new = create_run(
        mutation.namespace,
        req,
        signal=None,
        previous=ex,
        first_run_id=ex.first_run_id,
        attempt=attempt,
        extra_start_attrs={**extra_start_attrs, "last_completion_result": last_completion_result},
        inherited_expiration=ex.execution_expiration_time,
        inherited_build_id=ex.assigned_build_id if req.task_queue == ex.task_queue else None,
    )
    new.execution.last_completion_result = last_completion_result
    ex.new_run_id = new.execution.run_id
    mutation.followers.append(new)
    return new.execution
