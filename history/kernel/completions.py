"""Workflow-task completions: a worker's commands applied to its run, alone or many at once.

On its own a completion is one transaction: lock the task's run, check the token is its
current task, apply the commands to the run's mutation, write it in one statement
(:mod:`history.kernel.store`). A worker that finished many tasks while its last report was
on its way sends their completions in one request (``matching.lane_batch``); those whose
effects stay inside their own run are then applied in one transaction
(:func:`respond_workflow_tasks_completed`): the runs locked in one statement, each
completion applied exactly as on its own, all written in one statement and one commit.
When a sleep storm wakes thousands of runs at once, the per-transaction cost of each
completion (its lock, its write, its commit) was most of what the storm cost the frontends
and PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction

from chronicle.errors import ChronicleError, invalid
from history.faults import crash_point
from history.kernel import tokens, updates
from history.kernel._mutation import ExecutionMutation, save_all
from history.kernel.command_checks import CommandRejected
from history.kernel.commands import apply_commands, validate_command_list
from history.kernel.growth import continue_as_new_suggestion
from history.kernel.locks import lock_runs
from history.kernel.payloads import check_payload
from history.kernel.queries import (
    answer_buffered_queries_txn,
    buffered_queries,
    release_buffered_queries_txn,
)
from history.kernel.responses import WorkflowTaskResponse, build_workflow_task_response, serialize_event
from history.kernel.versioning import WorkerVersionStamp
from history.kernel.workflow_tasks import check_task_current, fail_task, lock_task_run
from history.models import WorkflowExecution
from history.vocabulary import CLOSE_COMMANDS, CommandType, EventType


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
    *, scope: tokens.TaskScope, task_token: str, **fields: Any
) -> CompletionResult:
    """Apply a completed workflow task's commands (temporal-semantics §2); ``fields`` are
    the rest of the completion's body, as :meth:`CompletionRequest.of` takes them."""
    token = tokens.decode(task_token, "wft")
    request = CompletionRequest.of(**fields)
    validate_command_list(request.commands)
    request.check()
    result: CompletionResult | None = None
    rejected: CommandRejected | None = None
    with transaction.atomic(durable=True):
        ex = lock_task_run(token, scope)
        try:
            result = complete_locked_txn(ex, request, ExecutionMutation.save)
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
    fail_rejected_completion(token, scope, request, rejected)
    return CompletionResult()


@dataclass(frozen=True)
class CompletionRequest:
    """A completion's body beyond its token: the commands, the update answers, the query
    answers and what the worker asks."""

    commands: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    query_results: dict[str, Any]
    options: CompletionOptions

    @classmethod
    def of(
        cls,
        *,
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
    ) -> CompletionRequest:
        """The request from the completion call's fields (the API's names).

        ``query_results`` answers the queries the task carried; they are kept even when the
        commands are rejected, since the answers came from the same replay.
        ``worker_version_stamp`` (the completing worker's build) is recorded on
        ``WorkflowTaskCompleted`` as ``worker_version``. ``messages`` answer the updates the
        task carried (:mod:`history.kernel.updates`).
        """
        return cls(
            commands=commands,
            messages=messages or [],
            query_results=query_results or {},
            options=CompletionOptions(
                identity=identity,
                sticky_task_queue=sticky_task_queue,
                sticky_schedule_to_start_timeout=sticky_schedule_to_start_timeout,
                return_new_workflow_task=return_new_workflow_task,
                force_create_new_workflow_task=force_create_new_workflow_task,
                return_recorded_events=return_recorded_events,
                worker_version=worker_version_stamp,
            ),
        )

    def check(self) -> None:
        """Refuse what no run state can make valid (the commands are checked apart)."""
        updates.check_messages(self.messages)
        if self.query_results and not isinstance(self.query_results, dict):
            raise invalid("query_results must be an object keyed by query id")


def complete_locked_txn(
    ex: WorkflowExecution, request: CompletionRequest, save: Callable[[ExecutionMutation], None]
) -> CompletionResult:
    """Apply a completion to its locked, current run; ``save`` writes the mutation (at once,
    or with other runs' by the caller). Raises :class:`CommandRejected` with a partial
    write the caller rolls back."""
    answer_buffered_queries_txn(ex, request.query_results)
    namespace = ex.namespace
    mutation = ExecutionMutation(ex, namespace)
    started_time = ex.wft_started_time
    commands, messages = request.commands, request.messages
    closes = bool(commands) and commands[-1]["command_type"] in CLOSE_COMMANDS
    if closes and (ex.buffered_events or updates.has_undelivered(ex, started_time)):
        fail_task(
            mutation,
            "WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND",
            {"message": "new events arrived while the workflow task ran"},
            request.options.identity,
            count_attempt=False,
        )
        save(mutation)
        return CompletionResult()
    try:
        for command in commands:
            check_payload(namespace, command.get("attributes", {}), command["command_type"])
        check_payload(namespace, messages, "update messages")
    except ChronicleError as exc:
        fail_task(
            mutation,
            "WORKFLOW_TASK_FAILED_CAUSE_BAD_BINARY",
            {"message": exc.message},
            request.options.identity,
            count_attempt=False,
        )
        mutation.close(
            "Terminated",
            EventType.WORKFLOW_EXECUTION_TERMINATED,
            {"reason": exc.message, "identity": "history-service", "details": None},
        )
        release_buffered_queries_txn(mutation)
        save(mutation)
        return CompletionResult()
    return apply_completion_txn(mutation, commands, messages, started_time, request.options, save)


def fail_rejected_completion(
    token: dict[str, Any], scope: tokens.TaskScope, request: CompletionRequest, rejected: CommandRejected
) -> None:
    """Fail the task whose completion carried a rejected command, in a new transaction (the
    completion's was rolled back); the query answers it carried are kept, since they came
    from the same replay."""
    with transaction.atomic(durable=True):
        ex = lock_task_run(token, scope)
        answer_buffered_queries_txn(ex, request.query_results)
        mutation = ExecutionMutation(ex, ex.namespace)
        fail_task(
            mutation,
            rejected.cause,
            {"message": rejected.message},
            request.options.identity,
            count_attempt=True,
        )
        mutation.save()


def apply_completion_txn(
    mutation: ExecutionMutation,
    commands: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    started_time: datetime | None,
    options: CompletionOptions,
    save: Callable[[ExecutionMutation], None] = ExecutionMutation.save,
) -> CompletionResult:
    """Write a started task's completion into ``mutation`` and save it: the Completed event,
    the update answers, the commands, then :func:`_finish_completion`. Raises
    :class:`CommandRejected` with the partial write to be rolled back by the caller."""
    completed_id = _write_completed(mutation, options.identity, options.worker_version)
    updates.apply_messages_txn(mutation, messages, completed_id, options.identity)
    eager = apply_commands(mutation, commands, completed_event_id=completed_id, identity=options.identity)
    updates.after_completion_txn(mutation, started_time)
    return _finish_completion(mutation, eager, options, save)


def _finish_completion(
    mutation: ExecutionMutation,
    eager: list[dict[str, Any]],
    options: CompletionOptions,
    save: Callable[[ExecutionMutation], None],
) -> CompletionResult:
    """After the commands: stickiness, the buffer flush, the next task, the save. A task
    handed straight back (``return_new_workflow_task``) is read after its save, so that
    case saves at once."""
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
        save(mutation)
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


# The commands whose effects stay inside their run: completions carrying only these may be
# written together. The others reach other runs (children, signals and cancels to other
# runs, a continue-as-new's next run), whose locks taken inside a shared transaction could
# meet another's in a different order.
TOGETHER_COMMANDS: frozenset[str] = frozenset(
    {
        CommandType.SCHEDULE_ACTIVITY_TASK,
        CommandType.REQUEST_CANCEL_ACTIVITY_TASK,
        CommandType.START_TIMER,
        CommandType.CANCEL_TIMER,
        CommandType.RECORD_MARKER,
        CommandType.UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
        CommandType.COMPLETE_WORKFLOW_EXECUTION,
        CommandType.FAIL_WORKFLOW_EXECUTION,
        CommandType.CANCEL_WORKFLOW_EXECUTION,
    }
)

CompletionAnswer = CompletionResult | ChronicleError


@dataclass(frozen=True)
class _Member:
    """A call of the group: its decoded token and the run it names."""

    token: dict[str, Any]
    run_id: uuid.UUID
    shard_id: int


def respond_workflow_tasks_completed(calls: Sequence[Mapping[str, Any]]) -> list[CompletionAnswer]:
    """Each call's answer, in order, as ``respond_workflow_task_completed(**call)`` gives it
    (its result, or the error it raises).

    The calls that may go together and name distinct runs are written in one transaction;
    each of the rest goes on its own after them, as does every call of the group again if
    applying one of them raised (a rejected command is rolled back and failed on its own)
    or the shared write failed: a failed group wrote nothing, so nothing is written twice.
    The answers are those of the calls made in order: the group's runs are distinct, and a
    run named twice goes alone, where at most one of its calls carries its current task."""
    answers: dict[int, CompletionAnswer] = {}
    group = _together(calls)
    if len(group) > 1:
        answers.update(_complete_together(calls, group))
    for i, call in enumerate(calls):
        if i not in answers:
            try:
                answers[i] = respond_workflow_task_completed(**call)
            except ChronicleError as error:
                answers[i] = error
    return [answers[i] for i in range(len(calls))]


def _together(calls: Sequence[Mapping[str, Any]]) -> dict[int, _Member]:
    """The calls that may be written together, by position: only commands of
    :data:`TOGETHER_COMMANDS`, no query answers, update messages or task asked back, a
    valid token of the call's namespace that names its shard, a run no other call names."""
    members: dict[int, _Member] = {}
    for i, call in enumerate(calls):
        commands = call.get("commands") or []
        if call.get("query_results") or call.get("messages") or call.get("return_new_workflow_task"):
            continue
        if not all(isinstance(c, dict) and c.get("command_type") in TOGETHER_COMMANDS for c in commands):
            continue
        try:
            token = tokens.decode(call["task_token"], "wft")
            validate_command_list(commands)
            tokens.check_issued_in(token, call["scope"])
            run_id = uuid.UUID(str(token["r"]))
        except (ChronicleError, ValueError):
            continue  # refused on its own, with its own answer
        shard_id = tokens.token_shard(token)
        if shard_id is not None:
            members[i] = _Member(token, run_id, shard_id)
    runs = Counter(member.run_id for member in members.values())
    return {i: member for i, member in members.items() if runs[member.run_id] == 1}


def _complete_together(
    calls: Sequence[Mapping[str, Any]], group: dict[int, _Member]
) -> dict[int, CompletionAnswer]:
    """One transaction for the group: one lock, each completion applied, one write, one
    commit. The group's answers once committed; none if it was rolled back."""
    answers: dict[int, CompletionAnswer] = {}
    try:
        with transaction.atomic(durable=True):
            locked = lock_runs([m.run_id for m in group.values()], [m.shard_id for m in group.values()])
            pending: list[ExecutionMutation] = []
            for i, member in group.items():
                call = calls[i]
                try:
                    ex = check_task_current(locked.get(member.run_id), member.token, call["scope"])
                except ChronicleError as error:
                    answers[i] = error  # refused before anything was written for it
                    continue
                request = CompletionRequest.of(**{k: v for k, v in call.items() if k not in _NOT_REQUEST})
                answers[i] = complete_locked_txn(ex, request, pending.append)
            save_all(pending)
            crash_point("before_commit")
    except (CommandRejected, ChronicleError, DatabaseError):
        return {}  # rolled back: each call goes on its own
    crash_point("after_commit_before_reply")
    return answers


_NOT_REQUEST = frozenset({"scope", "task_token"})
