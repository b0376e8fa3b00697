"""The vocabulary replay matching speaks: which event records which command, and how each is named.

A command and the event that records it must name the same thing ("activity 'charge' (id
'3')"); when they do not, the nondeterminism error quotes both names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PATCH_MARKER = "core_patch"
LOCAL_ACTIVITY_MARKER = "LocalActivity"
COMMAND_EVENTS = {
    "ScheduleActivityTask": "ActivityTaskScheduled",
    "RequestCancelActivityTask": "ActivityTaskCancelRequested",
    "StartTimer": "TimerStarted",
    "CancelTimer": "TimerCanceled",
    "RecordMarker": "MarkerRecorded",
    "UpsertWorkflowSearchAttributes": "UpsertWorkflowSearchAttributes",
    "CompleteWorkflowExecution": "WorkflowExecutionCompleted",
    "FailWorkflowExecution": "WorkflowExecutionFailed",
    "CancelWorkflowExecution": "WorkflowExecutionCanceled",
    "ContinueAsNewWorkflowExecution": "WorkflowExecutionContinuedAsNew",
    "StartChildWorkflowExecution": "StartChildWorkflowExecutionInitiated",
    "SignalExternalWorkflowExecution": "SignalExternalWorkflowExecutionInitiated",
    "RequestCancelExternalWorkflowExecution": "RequestCancelExternalWorkflowExecutionInitiated",
}
EVENT_COMMANDS = {event: command for command, event in COMMAND_EVENTS.items()}
CLOSE_COMMANDS = {
    "CompleteWorkflowExecution",
    "FailWorkflowExecution",
    "CancelWorkflowExecution",
    "ContinueAsNewWorkflowExecution",
}


@dataclass
class Command:
    """A command issued by workflow code, waiting for the event that records it."""

    seq: int
    command_type: str
    attributes: dict[str, Any]
    identity: str
    on_recorded: Callable[[int], None] | None = None

    def wire(self) -> dict[str, Any]:
        return {"command_type": self.command_type, "attributes": self.attributes}


def activity_identity(activity_type: object, activity_id: object) -> str:
    return f"activity {activity_type!r} (id {activity_id!r})"


def child_identity(workflow_type: str, workflow_id: str) -> str:
    return f"child workflow {workflow_type!r} (id {workflow_id!r})"


def event_identity(event: dict[str, Any]) -> str:
    """How replay names the command an event records, in the words the command used."""
    attrs = event.get("attributes") or {}
    kind = event["event_type"]
    target = (attrs.get("workflow_execution") or {}).get("workflow_id")
    if kind == "ActivityTaskScheduled":
        return activity_identity((attrs.get("activity_type") or {}).get("name"), attrs.get("activity_id"))
    if kind in ("TimerStarted", "TimerCanceled"):
        return f"timer {attrs.get('timer_id')!r}"
    if kind == "MarkerRecorded":
        return f"marker {attrs.get('marker_name')!r}{_patch_suffix(attrs.get('details'))}"
    if kind == "ActivityTaskCancelRequested":
        return f"cancel of activity scheduled at {attrs.get('scheduled_event_id')}"
    if kind == "StartChildWorkflowExecutionInitiated":
        return child_identity(
            str((attrs.get("workflow_type") or {}).get("name")), str(attrs.get("workflow_id"))
        )
    if kind == "SignalExternalWorkflowExecutionInitiated":
        return f"signal {attrs.get('signal_name')!r} to {target!r}"
    if kind == "RequestCancelExternalWorkflowExecutionInitiated":
        return f"cancel of {target!r}"
    return str(kind)


def is_patch_marker(event: dict[str, Any]) -> bool:
    attrs = event.get("attributes") or {}
    return event["event_type"] == "MarkerRecorded" and attrs.get("marker_name") == PATCH_MARKER


def _patch_suffix(details: Any) -> str:
    patch = (details or {}).get("patch_id") if isinstance(details, dict) else None
    return f" patch {patch.get('data')!r}" if isinstance(patch, dict) else ""
