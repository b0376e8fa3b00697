"""``EventType``: a history event's type, with the names and numbers of Temporal's enum.

Temporal's Python SDK exposes protobuf enums, whose values are ints named
``EVENT_TYPE_WORKFLOW_EXECUTION_STARTED`` and so on; ported code compares
``event.event_type == EventType.EVENT_TYPE_TIMER_FIRED`` or calls ``EventType.Name(...)``.
Chronicle's server writes the short form (``"WorkflowExecutionStarted"``, Temporal's own
names for its web UI and older exports); ``from_name`` reads either and ``short_name`` gives
the server's form back.
"""

from __future__ import annotations

import re
from enum import IntEnum

_PREFIX = "EVENT_TYPE_"


class EventType(IntEnum):
    """A history event's type (Temporal's ``temporal.api.enums.v1.EventType``)."""

    EVENT_TYPE_UNSPECIFIED = 0
    EVENT_TYPE_WORKFLOW_EXECUTION_STARTED = 1
    EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED = 2
    EVENT_TYPE_WORKFLOW_EXECUTION_FAILED = 3
    EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT = 4
    EVENT_TYPE_WORKFLOW_TASK_SCHEDULED = 5
    EVENT_TYPE_WORKFLOW_TASK_STARTED = 6
    EVENT_TYPE_WORKFLOW_TASK_COMPLETED = 7
    EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT = 8
    EVENT_TYPE_WORKFLOW_TASK_FAILED = 9
    EVENT_TYPE_ACTIVITY_TASK_SCHEDULED = 10
    EVENT_TYPE_ACTIVITY_TASK_STARTED = 11
    EVENT_TYPE_ACTIVITY_TASK_COMPLETED = 12
    EVENT_TYPE_ACTIVITY_TASK_FAILED = 13
    EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT = 14
    EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED = 15
    EVENT_TYPE_ACTIVITY_TASK_CANCELED = 16
    EVENT_TYPE_TIMER_STARTED = 17
    EVENT_TYPE_TIMER_FIRED = 18
    EVENT_TYPE_TIMER_CANCELED = 19
    EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED = 20
    EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED = 21
    EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED = 22
    EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED = 23
    EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED = 24
    EVENT_TYPE_MARKER_RECORDED = 25
    EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED = 26
    EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED = 27
    EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW = 28
    EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED = 29
    EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED = 30
    EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED = 31
    EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED = 32
    EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED = 33
    EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED = 34
    EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT = 35
    EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED = 36
    EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED = 37
    EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED = 38
    EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED = 39
    EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES = 40
    EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED = 41
    EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED = 42
    EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED = 43
    EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED_EXTERNALLY = 44
    EVENT_TYPE_ACTIVITY_PROPERTIES_MODIFIED_EXTERNALLY = 45
    EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED = 46
    EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED = 47
    EVENT_TYPE_NEXUS_OPERATION_SCHEDULED = 48
    EVENT_TYPE_NEXUS_OPERATION_STARTED = 49
    EVENT_TYPE_NEXUS_OPERATION_COMPLETED = 50
    EVENT_TYPE_NEXUS_OPERATION_FAILED = 51
    EVENT_TYPE_NEXUS_OPERATION_CANCELED = 52
    EVENT_TYPE_NEXUS_OPERATION_TIMED_OUT = 53
    EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED = 54
    EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED = 55
    EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUEST_COMPLETED = 56
    EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUEST_FAILED = 57

    @property
    def short_name(self) -> str:
        """The server's spelling: ``EVENT_TYPE_TIMER_FIRED`` -> ``"TimerFired"``."""
        words = self.name.removeprefix(_PREFIX).split("_")
        return "".join(word.capitalize() for word in words)

    @property
    def attributes_field(self) -> str:
        """The name of the event's attributes in Temporal's ``HistoryEvent`` message:
        ``EVENT_TYPE_TIMER_FIRED`` -> ``timer_fired_event_attributes``."""
        return self.name.removeprefix(_PREFIX).lower() + "_event_attributes"

    @classmethod
    def from_name(cls, name: str) -> EventType:
        """The member a name means: ``"TimerFired"``, ``"EVENT_TYPE_TIMER_FIRED"`` or ``"TIMER_FIRED"``.

        A name no version of the enum has raises ``ValueError`` (a history from a newer
        server than this SDK knows should say so, not replay as something else).
        """
        if not name.isupper():
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()
        member = cls.__members__.get(name if name.startswith(_PREFIX) else _PREFIX + name)
        if member is None:
            raise ValueError(f"unknown history event type {name!r}")
        return member

    @classmethod
    def Name(cls, number: int) -> str:  # protobuf's enum wrapper
        """The member's name for its number, as ``EventType.Name(event.event_type)`` reads in Temporal."""
        return cls(number).name

    @classmethod
    def Value(cls, name: str) -> int:  # protobuf's enum wrapper
        return int(cls[name])


__all__ = ["EventType"]
