"""A workflow task run ahead: an activity's result and the next task's commands in one call.

When an activity ran in the worker process that holds its run's workflow (sticky, cached),
the result's only effect is usually to wake that workflow. Temporal takes two calls for a
step: the result, then the completion of the workflow task it scheduled (here the first
already hands the task back, :mod:`history.kernel.handoff`). A worker may instead run that
task itself, at once, on the events it knows the server will write, and send its commands
with the result (``WorkflowTaskAhead``). One transaction then writes both, exactly as the
two calls would have, if and only if the run is where the worker believed it was:

* nothing reached the run since the worker's last completion: the next event id is the
  one the worker expects, no workflow task is pending, no event is buffered, and no query
  or update waits for a task (those need a task the worker has not seen);
* the task would have been handed back to this worker (its sticky queue, its slot);
* the task's start time (``workflow.now()``, on the worker's clock) falls between the
  activity's start and the server's now (and within :data:`MAX_CLOCK_SKEW` of it), and the
  server would not have suggested a continue-as-new. The whole write is stamped with that
  time, so the history's event times stay in order.

The events are the ones the two calls write, and the ``WorkflowTaskStarted`` event records
the start time and history size the worker's code saw, so a replay sees what the first run
saw. Anything else — a signal or timer in between, a rejected command, a payload over its
limit — refuses the run-ahead: the transaction is rolled back and the result is reported as
on its own (handing the task back), and the worker replays. A 2xx still means durable:
everything the answer reports is committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from chronicle.errors import ChronicleError
from history.faults import crash_point
from history.kernel import activity_tasks, handoff, tokens, updates
from history.kernel._mutation import ExecutionMutation
from history.kernel.command_checks import CommandRejected
from history.kernel.commands import validate_command_list
from history.kernel.completions import CompletionOptions, CompletionResult, apply_completion_txn
from history.kernel.handoff import WorkflowTaskWanted
from history.kernel.locks import may_have_buffered_queries
from history.kernel.payloads import check_payload
from history.kernel.responses import WorkflowTaskResponse
from history.vocabulary import EventType

# How far the worker's clock may be from the server's for its start time to be recorded.
MAX_CLOCK_SKEW = timedelta(seconds=5)
# The events between the activity's result and the task's start: ActivityTaskStarted,
# ActivityTaskCompleted, WorkflowTaskScheduled; WorkflowTaskStarted is the fourth.
_STARTED_OFFSET = 3


@dataclass(frozen=True)
class WorkflowTaskAhead:
    """The workflow task a worker ran on an activity's result before reporting it."""

    expected_event_id: int  # the id the result's first event (ActivityTaskStarted) must get
    started_time: datetime  # the task's start as the worker's code saw it
    history_size_bytes: int  # the history size ``info()`` reported to that code
    commands: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    sticky_schedule_to_start_timeout: float = 0.0


@dataclass
class ActivityReported:
    """An activity report's answer: the task handed back, or the run-ahead's completion."""

    handed_back: WorkflowTaskResponse | None = None
    ahead: CompletionResult | None = None


class _Refused(Exception):
    """The run moved on, or the task would not complete: report the result on its own."""


def report_activity_task_completed(
    *,
    scope: tokens.TaskScope,
    task_token: str,
    result: Any,
    identity: str = "",
    wanted: WorkflowTaskWanted | None = None,
    ahead: WorkflowTaskAhead | None = None,
) -> ActivityReported:
    """Complete the activity, with the task run ahead when the run allows it, else as
    :func:`history.kernel.activity_tasks.respond_activity_task_completed` does."""
    if ahead is not None and wanted is not None:
        try:
            return ActivityReported(ahead=_complete_both(scope, task_token, result, identity, wanted, ahead))
        except _Refused:
            pass
    handed = activity_tasks.respond_activity_task_completed(
        scope=scope, task_token=task_token, result=result, identity=identity, wanted=wanted
    )
    return ActivityReported(handed_back=handed)


def _complete_both(
    scope: tokens.TaskScope,
    task_token: str,
    result: Any,
    identity: str,
    wanted: WorkflowTaskWanted,
    ahead: WorkflowTaskAhead,
) -> CompletionResult:
    """One transaction: the activity's close, the task handed back and started as the
    worker ran it, and its completion; :class:`_Refused` (rolled back) when it cannot be."""
    token = tokens.decode(task_token, "act")
    validate_command_list(ahead.commands)
    updates.check_messages(ahead.messages)
    with transaction.atomic(durable=True):
        m, activity = activity_tasks.lock_activity(token, scope)
        _check_unchanged(m, ahead)
        try:
            check_payload(m.namespace, result, "activity result")
            for command in ahead.commands:
                check_payload(m.namespace, command.get("attributes", {}), command["command_type"])
        except ChronicleError as exc:
            raise _Refused from exc
        # The whole write is stamped with the task's start, so the history's times stay in order.
        m.now = _worker_start(m, activity.started_time, ahead)
        activity_tasks.close_activity(
            m, activity, EventType.ACTIVITY_TASK_COMPLETED, {"result": result, "identity": identity}
        )
        if not handoff.start_if_wanted(m, wanted):
            raise _Refused
        _adopt_worker_start(m, ahead)
        options = CompletionOptions(
            identity=wanted.identity,
            sticky_task_queue=wanted.sticky_task_queue,
            sticky_schedule_to_start_timeout=ahead.sticky_schedule_to_start_timeout,
            return_recorded_events=True,
            worker_version=wanted.worker_version,
        )
        try:
            completion = apply_completion_txn(m, ahead.commands, ahead.messages, m.now, options)
        except CommandRejected as exc:
            raise _Refused from exc
        crash_point("before_commit")
    crash_point("after_commit_before_reply")
    return completion


def _check_unchanged(m: ExecutionMutation, ahead: WorkflowTaskAhead) -> None:
    """Refuse unless the run is where the worker last saw it, waiting only on this result."""
    ex = m.execution
    if (
        not ex.is_running
        or ex.next_event_id != ahead.expected_event_id
        or ex.wft_scheduled_event_id != 0
        or ex.buffered_events
        or ex.updates_in_flight
        or may_have_buffered_queries(ex)
    ):
        raise _Refused


def _worker_start(
    m: ExecutionMutation, activity_started: datetime | None, ahead: WorkflowTaskAhead
) -> datetime:
    """The worker's start of the task, if the server can record it: after the activity's
    own start (the run's last event) and not after the server's now, so that every event of
    the history follows the one before; and within :data:`MAX_CLOCK_SKEW` of now."""
    started = ahead.started_time
    if started > m.now or m.now - started > MAX_CLOCK_SKEW:
        raise _Refused
    if activity_started is not None and started < activity_started:
        raise _Refused
    return started


def _adopt_worker_start(m: ExecutionMutation, ahead: WorkflowTaskAhead) -> None:
    """Give the started task the history size the worker's code saw (its time is the
    write's, :func:`_worker_start`)."""
    ex = m.execution
    started = m.appended_events[-1]
    if (
        ex.wft_started_event_id != ahead.expected_event_id + _STARTED_OFFSET
        or started.event_type != EventType.WORKFLOW_TASK_STARTED
        or started.attributes.get("suggest_continue_as_new")
    ):
        raise _Refused
    started.attributes["history_size_bytes"] = ahead.history_size_bytes
