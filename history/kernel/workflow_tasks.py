"""Workflow tasks: record started (for matching), complete with commands, fail."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction

from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.faults import crash_point
from history.kernel import tokens, updates
from history.kernel._mutation import ExecutionMutation, save_all
from history.kernel.command_checks import CommandRejected
from history.kernel.commands import apply_commands, validate_command_list
from history.kernel.growth import continue_as_new_suggestion
from history.kernel.payloads import check_payload
from history.kernel.queries import (
    answer_buffered_queries_txn,
    buffered_queries,
    release_buffered_queries_txn,
)
from history.kernel.responses import (
    WorkflowTaskResponse,
    build_workflow_task_response,
    histories_after,
    history_start,
    serialize_event,
)
from history.kernel.versioning import WorkerVersionStamp
from history.models import WorkflowExecution
from history.vocabulary import CLOSE_COMMANDS, EventType


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
    started: list[tuple[WorkflowTaskClaim, ExecutionMutation] | None] = []
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
        started.append((claim, mutation))
    mutations = [pair[1] for pair in started if pair is not None]
    if len(mutations) == 1:
        mutations[0].save()
    elif mutations:
        save_all(mutations)
    return _responses(started)


def _responses(
    started: list[tuple[WorkflowTaskClaim, ExecutionMutation] | None],
) -> list[WorkflowTaskResponse | None]:
    """The started tasks' answers, their new events read in one statement."""
    runs = [(pair[0].execution, _sticky(pair[0])) for pair in started if pair is not None]
    histories = (
        histories_after([(ex, history_start(ex, sticky=sticky)) for ex, sticky in runs]) if runs else {}
    )
    answers: list[WorkflowTaskResponse | None] = []
    for pair in started:
        if pair is None:
            answers.append(None)
            continue
        ex = pair[0].execution
        response = build_workflow_task_response(ex, sticky=_sticky(pair[0]), history=histories[ex.run_id])
        # The queries buffered for this run ride on the task; the worker answers in its completion.
        response.queries = buffered_queries(ex)
        answers.append(response)
    return answers


def _sticky(claim: WorkflowTaskClaim) -> bool:
    """Whether the task was taken from its run's sticky queue (its worker holds the run)."""
    return claim.task_queue == claim.execution.sticky_task_queue != ""


def _lock_for_token(token: dict[str, Any], scope: tokens.TaskScope) -> WorkflowExecution:
    """Lock the token's run; refuse a task of another namespace or queue as unknown, and a
    task the run has moved past as stale."""
    ex = tokens.lock_token_run(token, scope)
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


@dataclass
class CompletionResult:
    new_workflow_task: WorkflowTaskResponse | None = None
    activity_tasks: list[dict[str, Any]] = field(default_factory=list)
    # When the completion closed the run: its close event and the run that carries on (a
    # continue-as-new, a retry or a cron run), so a caller in the completing worker's
    # process needs no further call to learn the result.
    closed: dict[str, Any] | None = None
    # The events the completion wrote, when the worker asked (to run the next task ahead,
    # :mod:`history.kernel.run_ahead`): what its cached run has not seen yet.
    recorded_events: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class CompletionOptions:
    """What a completing worker asks beyond its commands."""

    identity: str = ""
    sticky_task_queue: str = ""
    sticky_schedule_to_start_timeout: float = 0.0
    return_new_workflow_task: bool = False
    force_create_new_workflow_task: bool = False
    return_recorded_events: bool = False
    worker_version: WorkerVersionStamp | None = None


def respond_workflow_task_completed(
    *,
    scope: tokens.TaskScope,
    task_token: str,
    commands: list[dict[str, Any]],
    identity: str = "",
    sticky_task_queue: str = "",
    sticky_schedule_to_start_timeout: float = 0.0,
    return_new_workflow_task: bool = False,
    force_create_new_workflow_task: bool = False,
    query_results: dict[str, Any] | None = None,
    worker_version_stamp: WorkerVersionStamp | None = None,
    messages: list[dict[str, Any]] | None = None,
    return_recorded_events: bool = False,
) -> CompletionResult:
    """Apply a completed workflow task's commands (temporal-semantics §2).

    ``query_results`` answers the queries the task carried; they are kept even when the
    commands are rejected, since the answers came from the same replay.
    ``worker_version_stamp`` (the completing worker's build) is recorded on
    ``WorkflowTaskCompleted`` as ``worker_version``. ``messages`` answer the updates the task
    carried (:mod:`history.kernel.updates`).
    """
    token = tokens.decode(task_token, "wft")
    validate_command_list(commands)
    messages = messages or []
    updates.check_messages(messages)
    if query_results and not isinstance(query_results, dict):
        raise invalid("query_results must be an object keyed by query id")
    result: CompletionResult | None = None
    rejected: CommandRejected | None = None
    with transaction.atomic(durable=True):
        ex = _lock_for_token(token, scope)
        answer_buffered_queries_txn(ex, query_results or {})
        namespace = ex.namespace
        mutation = ExecutionMutation(ex, namespace)
        started_time = ex.wft_started_time
        closes = bool(commands) and commands[-1]["command_type"] in CLOSE_COMMANDS
        if closes and (ex.buffered_events or updates.has_undelivered(ex, started_time)):
            _fail_task(
                mutation,
                "WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND",
                {"message": "new events arrived while the workflow task ran"},
                identity,
                count_attempt=False,
            )
            mutation.save()
            return CompletionResult()
        try:
            for command in commands:
                check_payload(namespace, command.get("attributes", {}), command["command_type"])
            check_payload(namespace, messages, "update messages")
        except ChronicleError as exc:
            _fail_task(
                mutation,
                "WORKFLOW_TASK_FAILED_CAUSE_BAD_BINARY",
                {"message": exc.message},
                identity,
                count_attempt=False,
            )
            mutation.close(
                "Terminated",
                EventType.WORKFLOW_EXECUTION_TERMINATED,
                {"reason": exc.message, "identity": "history-service", "details": None},
            )
            release_buffered_queries_txn(mutation)
            mutation.save()
            return CompletionResult()
        options = CompletionOptions(
            identity=identity,
            sticky_task_queue=sticky_task_queue,
            sticky_schedule_to_start_timeout=sticky_schedule_to_start_timeout,
            return_new_workflow_task=return_new_workflow_task,
            force_create_new_workflow_task=force_create_new_workflow_task,
            return_recorded_events=return_recorded_events,
            worker_version=worker_version_stamp,
        )
        try:
            result = apply_completion_txn(mutation, commands, messages, started_time, options)
        except CommandRejected as exc:
            rejected = exc
            transaction.set_rollback(True)
        else:
            crash_point("before_commit")
    if result is not None:
        crash_point("after_commit_before_reply")
        return result
    # A rejected command fails the task; the rollback above discarded the partial write.
    assert rejected is not None
    with transaction.atomic(durable=True):
        ex = _lock_for_token(token, scope)
        answer_buffered_queries_txn(ex, query_results or {})
        mutation = ExecutionMutation(ex, ex.namespace)
        _fail_task(mutation, rejected.cause, {"message": rejected.message}, identity, count_attempt=True)
        mutation.save()
    return CompletionResult()


def apply_completion_txn(
    mutation: ExecutionMutation,
    commands: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    started_time: datetime | None,
    options: CompletionOptions,
) -> CompletionResult:
    """Write a started task's completion into ``mutation`` and save it: the Completed event,
    the update answers, the commands, then :func:`_finish_completion`. Raises
    :class:`CommandRejected` with the partial write to be rolled back by the caller."""
    completed_id = _write_completed(mutation, options.identity, options.worker_version)
    updates.apply_messages_txn(mutation, messages, completed_id, options.identity)
    eager = apply_commands(mutation, commands, completed_event_id=completed_id, identity=options.identity)
    updates.after_completion_txn(mutation, started_time)
    return _finish_completion(mutation, eager, options)


def _finish_completion(
    mutation: ExecutionMutation, eager: list[dict[str, Any]], options: CompletionOptions
) -> CompletionResult:
    """After the commands: stickiness, the buffer flush, the next task, the save."""
    ex = mutation.execution
    ex.sticky_task_queue = options.sticky_task_queue if ex.is_running else ""
    if options.sticky_schedule_to_start_timeout > 0:
        ex.sticky_schedule_to_start_timeout = options.sticky_schedule_to_start_timeout
    had_buffered = mutation.flush_buffer()
    if ex.is_running and (had_buffered or options.force_create_new_workflow_task or mutation.force_new_task):
        mutation.schedule_workflow_task()
    release_buffered_queries_txn(mutation)
    recorded = None
    if options.return_recorded_events:
        # From the Completed event on: the task's own events are the worker's already.
        seen = ex.last_wft_started_event_id
        recorded = [serialize_event(e) for e in mutation.appended_events if e.event_id > seen]
    new_task = None
    inline = ex.is_running and ex.wft_scheduled_event_id and not ex.sticky_task_queue
    if options.return_new_workflow_task and inline:
        mutation.start_workflow_task(
            identity=options.identity, request_id="inline", worker_version=options.worker_version
        )
        mutation.save()
        new_task = build_workflow_task_response(ex, sticky=False)
        new_task.queries = buffered_queries(ex)
    else:
        mutation.save()
    return CompletionResult(
        new_workflow_task=new_task, activity_tasks=eager, closed=_closed(mutation), recorded_events=recorded
    )


def _closed(mutation: ExecutionMutation) -> dict[str, Any] | None:
    """The close a completion wrote, as its answer tells it (after the save: ids are set)."""
    event = mutation.close_event
    if event is None:
        return None
    new_run_id = mutation.execution.new_run_id
    return {"event": serialize_event(event), "new_run_id": str(new_run_id) if new_run_id else None}


def _write_completed(
    mutation: ExecutionMutation, identity: str, worker_version: WorkerVersionStamp | None
) -> int:
    """Write WorkflowTaskCompleted (with the transient Scheduled/Started first).

    The worker that completes a task is the one that started it (the token says so),
    so its stamp also stands for the transient Started event's.
    """
    ex = mutation.execution
    stamp = {"worker_version": worker_version.as_dict()} if worker_version is not None else {}
    if ex.wft_attempt > 1:
        ex.wft_scheduled_event_id = mutation.append(
            EventType.WORKFLOW_TASK_SCHEDULED,
            {
                "task_queue": {"name": ex.wft_task_queue},
                "start_to_close_timeout": ex.task_timeout,
                "attempt": ex.wft_attempt,
            },
        )
        ex.wft_started_event_id = mutation.append(
            EventType.WORKFLOW_TASK_STARTED,
            {
                "scheduled_event_id": ex.wft_scheduled_event_id,
                "identity": ex.wft_identity,
                "request_id": ex.wft_request_id,
                **stamp,
                **continue_as_new_suggestion(ex, mutation.namespace),
            },
        )
    completed = mutation.append(
        EventType.WORKFLOW_TASK_COMPLETED,
        {
            "scheduled_event_id": ex.wft_scheduled_event_id,
            "started_event_id": ex.wft_started_event_id,
            "identity": identity,
            **stamp,
        },
    )
    ex.last_wft_started_event_id = ex.wft_started_event_id
    ex.last_wft_completed_event_id = completed
    mutation.clear_workflow_task()
    ex.wft_attempt = 1
    return completed


def _on_sticky_queue(ex: WorkflowExecution) -> bool:
    """Whether the in-flight workflow task was dispatched to the run's sticky queue."""
    return bool(ex.sticky_task_queue) and ex.wft_task_queue == ex.sticky_task_queue


def _fail_task(
    mutation: ExecutionMutation,
    cause: str,
    failure: dict[str, Any],
    identity: str,
    *,
    count_attempt: bool,
) -> None:
    """Fail the in-flight workflow task and schedule its retry (never fails the run)."""
    ex = mutation.execution
    on_sticky = _on_sticky_queue(ex)
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
        ex = _lock_for_token(token, scope)
        mutation = ExecutionMutation(ex, ex.namespace)
        _fail_task(mutation, cause, failure, identity, count_attempt=True)
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
    attempt = 1 if _on_sticky_queue(ex) else ex.wft_attempt + 1
    ex.sticky_task_queue = ""
    mutation.clear_workflow_task()
    had_buffered = mutation.flush_buffer()
    mutation.schedule_workflow_task(attempt=1 if had_buffered else attempt)
