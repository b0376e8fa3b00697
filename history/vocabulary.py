"""The names history is written in: event types and command types, as Temporal spells them.

One definition for the server: the kernel writes and compares these, and the UI,
visibility and matching read them. The module imports nothing from the kernel (nor
Django), so any of them may use it without pulling the write path in.

The members are ``StrEnum``s: a member equals the plain string stored in
``HistoryEvent.event_type`` and sent on the wire (``EventType.TIMER_FIRED ==
"TimerFired"``), so rows and JSON are the same whether code writes a member or a string.
The SDK keeps its own copy of the names: it must not import server code.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    """A history event's type (Temporal's ``EventType`` without the ``EVENT_TYPE_`` prefix)."""

    WORKFLOW_EXECUTION_STARTED = "WorkflowExecutionStarted"
    WORKFLOW_EXECUTION_COMPLETED = "WorkflowExecutionCompleted"
    WORKFLOW_EXECUTION_FAILED = "WorkflowExecutionFailed"
    WORKFLOW_EXECUTION_TIMED_OUT = "WorkflowExecutionTimedOut"
    WORKFLOW_EXECUTION_CANCELED = "WorkflowExecutionCanceled"
    WORKFLOW_EXECUTION_TERMINATED = "WorkflowExecutionTerminated"
    WORKFLOW_EXECUTION_CONTINUED_AS_NEW = "WorkflowExecutionContinuedAsNew"
    WORKFLOW_EXECUTION_SIGNALED = "WorkflowExecutionSignaled"
    WORKFLOW_EXECUTION_CANCEL_REQUESTED = "WorkflowExecutionCancelRequested"

    WORKFLOW_TASK_SCHEDULED = "WorkflowTaskScheduled"
    WORKFLOW_TASK_STARTED = "WorkflowTaskStarted"
    WORKFLOW_TASK_COMPLETED = "WorkflowTaskCompleted"
    WORKFLOW_TASK_FAILED = "WorkflowTaskFailed"
    WORKFLOW_TASK_TIMED_OUT = "WorkflowTaskTimedOut"

    ACTIVITY_TASK_SCHEDULED = "ActivityTaskScheduled"
    ACTIVITY_TASK_STARTED = "ActivityTaskStarted"
    ACTIVITY_TASK_COMPLETED = "ActivityTaskCompleted"
    ACTIVITY_TASK_FAILED = "ActivityTaskFailed"
    ACTIVITY_TASK_TIMED_OUT = "ActivityTaskTimedOut"
    ACTIVITY_TASK_CANCEL_REQUESTED = "ActivityTaskCancelRequested"
    ACTIVITY_TASK_CANCELED = "ActivityTaskCanceled"

    TIMER_STARTED = "TimerStarted"
    TIMER_FIRED = "TimerFired"
    TIMER_CANCELED = "TimerCanceled"

    MARKER_RECORDED = "MarkerRecorded"
    UPSERT_WORKFLOW_SEARCH_ATTRIBUTES = "UpsertWorkflowSearchAttributes"

    START_CHILD_WORKFLOW_EXECUTION_INITIATED = "StartChildWorkflowExecutionInitiated"
    START_CHILD_WORKFLOW_EXECUTION_FAILED = "StartChildWorkflowExecutionFailed"
    CHILD_WORKFLOW_EXECUTION_STARTED = "ChildWorkflowExecutionStarted"
    CHILD_WORKFLOW_EXECUTION_COMPLETED = "ChildWorkflowExecutionCompleted"
    CHILD_WORKFLOW_EXECUTION_FAILED = "ChildWorkflowExecutionFailed"
    CHILD_WORKFLOW_EXECUTION_CANCELED = "ChildWorkflowExecutionCanceled"
    CHILD_WORKFLOW_EXECUTION_TIMED_OUT = "ChildWorkflowExecutionTimedOut"
    CHILD_WORKFLOW_EXECUTION_TERMINATED = "ChildWorkflowExecutionTerminated"

    SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED = "SignalExternalWorkflowExecutionInitiated"
    SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED = "SignalExternalWorkflowExecutionFailed"
    EXTERNAL_WORKFLOW_EXECUTION_SIGNALED = "ExternalWorkflowExecutionSignaled"
    REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED = "RequestCancelExternalWorkflowExecutionInitiated"
    REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED = "RequestCancelExternalWorkflowExecutionFailed"
    EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED = "ExternalWorkflowExecutionCancelRequested"

    # Update: a rejection writes nothing (Temporal never writes its UpdateRejected event).
    WORKFLOW_EXECUTION_UPDATE_ACCEPTED = "WorkflowExecutionUpdateAccepted"
    WORKFLOW_EXECUTION_UPDATE_COMPLETED = "WorkflowExecutionUpdateCompleted"


class CommandType(StrEnum):
    """A workflow-task command's type (Temporal's ``CommandType`` without ``COMMAND_TYPE_``)."""

    SCHEDULE_ACTIVITY_TASK = "ScheduleActivityTask"
    REQUEST_CANCEL_ACTIVITY_TASK = "RequestCancelActivityTask"
    START_TIMER = "StartTimer"
    CANCEL_TIMER = "CancelTimer"
    RECORD_MARKER = "RecordMarker"
    UPSERT_WORKFLOW_SEARCH_ATTRIBUTES = "UpsertWorkflowSearchAttributes"
    COMPLETE_WORKFLOW_EXECUTION = "CompleteWorkflowExecution"
    FAIL_WORKFLOW_EXECUTION = "FailWorkflowExecution"
    CANCEL_WORKFLOW_EXECUTION = "CancelWorkflowExecution"
    CONTINUE_AS_NEW_WORKFLOW_EXECUTION = "ContinueAsNewWorkflowExecution"
    START_CHILD_WORKFLOW_EXECUTION = "StartChildWorkflowExecution"
    SIGNAL_EXTERNAL_WORKFLOW_EXECUTION = "SignalExternalWorkflowExecution"
    REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION = "RequestCancelExternalWorkflowExecution"


# The events that close a run: exactly one ends every run, and nothing follows it.
CLOSE_EVENTS: frozenset[EventType] = frozenset(
    {
        EventType.WORKFLOW_EXECUTION_COMPLETED,
        EventType.WORKFLOW_EXECUTION_FAILED,
        EventType.WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.WORKFLOW_EXECUTION_CANCELED,
        EventType.WORKFLOW_EXECUTION_TERMINATED,
        EventType.WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    }
)

# The commands that close a run: one may only come last in a completion's command list.
CLOSE_COMMANDS: frozenset[CommandType] = frozenset(
    {
        CommandType.COMPLETE_WORKFLOW_EXECUTION,
        CommandType.FAIL_WORKFLOW_EXECUTION,
        CommandType.CANCEL_WORKFLOW_EXECUTION,
        CommandType.CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
    }
)
