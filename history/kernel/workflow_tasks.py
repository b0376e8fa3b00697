"""Workflow tasks: record started (for matching), the token's lock and checks, fail, time out.

Completing a task is :mod:`history.kernel.completions`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.kernel import tokens
from history.kernel._mutation import ExecutionMutation, save_all
from history.kernel.queries import (
    buffered_queries,
)
from history.kernel.responses import (
    WorkflowTaskResponse,
    build_workflow_task_response,
    histories_after,
    history_start,
)
from history.kernel.versioning import WorkerVersionStamp
from history.models import WorkflowExecution
from history.vocabulary import EventType


@dataclass(frozen=True)
class WorkflowTaskClaim:
    """A claimed workflow task row, on its locked run: what a poll asks the kernel to start."""

    execution: WorkflowExecution
    scheduled_event_id: int
    attempt: int
    task_queue: str
    request_id: str
    # A normal-queue poller taking a task left on a sticky queue with no live poller:
    # stickiness is cleared and the full history sent.
    sticky_fallback: bool = False

    def current(self) -> bool:
        """Whether the row still names the run's pending, unstarted workflow task."""
        ex = self.execution
        return (
            ex.is_running
            and ex.wft_scheduled_event_id == self.scheduled_event_id
            and ex.wft_started_event_id == 0
            and ex.wft_attempt == self.attempt
            and ex.wft_task_queue == self.task_queue
        )


def record_workflow_task_started_txn(
    ex: WorkflowExecution,
    *,
    scheduled_event_id: int,
    attempt: int,
    task_queue: str,
    identity: str,
    request_id: str,
    sticky_fallback: bool = False,
    worker_version: WorkerVersionStamp | None = None,
) -> WorkflowTaskResponse | None:
    """Start the run's pending workflow task if the claimed row is still current (see
    :func:`record_workflow_tasks_started_txn`, of which this is the one-task case)."""
    claim = WorkflowTaskClaim(ex, scheduled_event_id, attempt, task_queue, request_id, sticky_fallback)
    return record_workflow_tasks_started_txn([claim], identity=identity, worker_version=worker_version)[0]


def record_workflow_tasks_started_txn(
    claims: Sequence[WorkflowTaskClaim],
    *,
    identity: str,
    worker_version: WorkerVersionStamp | None = None,
) -> list[WorkflowTaskResponse | None]:
    """Start each claimed task whose row is still current; its response, or None when the
    row was stale (the task already started, completed or moved).

    Precondition: inside a transaction with the runs locked ``FOR UPDATE``. A batch of
    tasks (a poll taking a storm of woken runs) is one write for all their runs and one
    read of all their new events, not a write and a read per task. ``worker_version`` (the
    poller's build) is recorded on each ``WorkflowTaskStarted``.
    """
    assert transaction.get_connection().in_atomic_block
    started: list[WorkflowTaskClaim | None] = []
    mutations: list[ExecutionMutation] = []
    for claim in claims:
        if not claim.current():  # a run claimed twice in a batch is stale the second time
            started.append(None)
            continue
        ex = claim.execution
        if claim.sticky_fallback:
            ex.sticky_task_queue = ""
            ex.wft_task_queue = ex.task_queue
        mutation = ExecutionMutation(ex, ex.namespace)
        mutation.start_workflow_task(
            identity=identity, request_id=claim.request_id, worker_version=worker_version
        )
        started.append(claim)
        mutations.append(mutation)
    if len(mutations) == 1:
        mutations[0].save()
    elif mutations:
        save_all(mutations)
    return _responses(started)


def _responses(started: list[WorkflowTaskClaim | None]) -> list[WorkflowTaskResponse | None]:
    """The started tasks' answers, their new events read in one statement."""
    sticky = {claim.execution.run_id: _sticky(claim) for claim in started if claim is not None}
    reads = [
        (claim.execution, history_start(claim.execution, sticky=sticky[claim.execution.run_id]))
        for claim in started
        if claim is not None
    ]
    histories = histories_after(reads) if reads else {}
    answers: list[WorkflowTaskResponse | None] = []
    for claim in started:
        if claim is None:
            answers.append(None)
            continue
        ex = claim.execution
        response = build_workflow_task_response(ex, sticky=sticky[ex.run_id], history=histories[ex.run_id])
        # The queries buffered for this run ride on the task; the worker answers in its completion.
        response.queries = buffered_queries(ex)
        answers.append(response)
    return answers


def _sticky(claim: WorkflowTaskClaim) -> bool:
    """Whether the task was taken from its run's sticky queue (its worker holds the run)."""
    return claim.task_queue == claim.execution.sticky_task_queue != ""


def lock_task_run(token: dict[str, Any], scope: tokens.TaskScope) -> WorkflowExecution:
    """Lock the token's run; refuse a task of another namespace or queue as unknown, and a
    task the run has moved past as stale."""
    return check_task_current(tokens.lock_token_run(token, scope), token, scope)


def check_task_current(
    ex: WorkflowExecution | None, token: dict[str, Any], scope: tokens.TaskScope
) -> WorkflowExecution:
    """The locked run (None: not found) if the token's task is its current, started
    workflow task and the call's scope is the run's namespace and one of its queues."""
    if ex is None or ex.namespace_id != scope.namespace_id:
        raise tokens.task_not_found()
    tokens.check_scope(
        scope,
        namespace_id=ex.namespace_id,
        queues=(ex.task_queue, ex.sticky_task_queue, ex.wft_task_queue),
    )
    if (
        not ex.is_running
        or ex.wft_scheduled_event_id != token["s"]
        or ex.wft_started_event_id != token["st"]
        or ex.wft_attempt != token["a"]
        or token["st"] == 0
    ):
        raise ChronicleError(ErrorCode.STALE_TASK, "Workflow task not found.")
    return ex


def on_sticky_queue(ex: WorkflowExecution) -> bool:
    """Whether the in-flight workflow task was dispatched to the run's sticky queue."""
    return bool(ex.sticky_task_queue) and ex.wft_task_queue == ex.sticky_task_queue


def fail_task(
    mutation: ExecutionMutation,
    cause: str,
    failure: dict[str, Any],
    identity: str,
    *,
    count_attempt: bool,
) -> None:
    """Fail the in-flight workflow task and schedule its retry (never fails the run)."""
    ex = mutation.execution
    on_sticky = on_sticky_queue(ex)
    if ex.wft_attempt == 1:
        mutation.append(
            EventType.WORKFLOW_TASK_FAILED,
            {
                "scheduled_event_id": ex.wft_scheduled_event_id,
                "started_event_id": ex.wft_started_event_id,
                "cause": cause,
                "failure": failure,
                "identity": identity,
            },
        )
    # Temporal's rule: a failure on a sticky queue clears stickiness without counting an
    # attempt, so the retry on the normal queue is attempt 1 (and writes its events).
    attempt = ex.wft_attempt + 1 if count_attempt and not on_sticky else 1
    ex.sticky_task_queue = ""
    mutation.clear_workflow_task()
    had_buffered = mutation.flush_buffer()
    mutation.schedule_workflow_task(attempt=1 if had_buffered else attempt)


def respond_workflow_task_failed(
    *,
    scope: tokens.TaskScope,
    task_token: str,
    cause: str,
    failure: dict[str, Any],
    identity: str = "",
) -> None:
    token = tokens.decode(task_token, "wft")
    if not cause:
        raise invalid("cause is required")
    with transaction.atomic(durable=True):
        ex = lock_task_run(token, scope)
        mutation = ExecutionMutation(ex, ex.namespace)
        fail_task(mutation, cause, failure, identity, count_attempt=True)
        mutation.save()


def time_out_workflow_task_txn(mutation: ExecutionMutation, *, timeout_type: str) -> None:
    """Called by the timer queue when a started task overruns or a sticky one waits too long."""
    ex = mutation.execution
    if timeout_type == "SCHEDULE_TO_START":
        mutation.append(
            EventType.WORKFLOW_TASK_TIMED_OUT,
            {
                "scheduled_event_id": ex.wft_scheduled_event_id,
                "started_event_id": 0,
                "timeout_type": "SCHEDULE_TO_START",
            },
        )
        attempt = ex.wft_attempt
        ex.sticky_task_queue = ""
        mutation.clear_workflow_task()
        mutation.flush_buffer()
        mutation.schedule_workflow_task(attempt=attempt)
        return
    if ex.wft_attempt == 1:
        mutation.append(
            EventType.WORKFLOW_TASK_TIMED_OUT,
            {
                "scheduled_event_id": ex.wft_scheduled_event_id,
                "started_event_id": ex.wft_started_event_id,
                "timeout_type": "START_TO_CLOSE",
            },
        )
    attempt = 1 if on_sticky_queue(ex) else ex.wft_attempt + 1
    ex.sticky_task_queue = ""
    mutation.clear_workflow_task()
    had_buffered = mutation.flush_buffer()
    mutation.schedule_workflow_task(attempt=1 if had_buffered else attempt)
