"""``HistoryEvent`` and ``History``: a run's history read as Temporal's typed messages.

A ``HistoryEvent`` *is* the server's JSON event (a dict: ``event_id``, ``event_type``,
``event_time``, ``attributes``), so it serialises, compares and indexes exactly as the
server wrote it (``event["event_type"] == "TimerFired"``), and it also answers Temporal's
names: ``event.event_type`` is an ``EventType``, ``event.event_id`` an int,
``event.event_time`` a datetime, and ``event.timer_fired_event_attributes`` (or the
generic ``event.attributes``) the typed attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sdk.api.enums.v1 import EventType
from sdk.api.history.v1._attributes import (
    ActivityTaskCompletedEventAttributes,
    ActivityTaskFailedEventAttributes,
    ActivityTaskScheduledEventAttributes,
    ChildWorkflowExecutionCompletedEventAttributes,
    Duration,
    MarkerRecordedEventAttributes,
    Message,
    StartChildWorkflowExecutionInitiatedEventAttributes,
    TimerFiredEventAttributes,
    TimerStartedEventAttributes,
    Timestamp,
    WorkflowExecutionCompletedEventAttributes,
    WorkflowExecutionFailedEventAttributes,
    WorkflowExecutionSignaledEventAttributes,
    WorkflowExecutionStartedEventAttributes,
    WorkflowTaskCompletedEventAttributes,
    attributes_for,
)

_ATTRIBUTE_FIELDS = {member.attributes_field: member for member in EventType}


class HistoryEvent(dict[str, Any]):
    """One history event: the server's JSON, with Temporal's typed accessors."""

    def __init__(self, wire: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        super().__init__(wire or {}, **fields)
        EventType.from_name(str(self.get("event_type") or ""))  # an unknown type fails here, not later

    @property
    def event_id(self) -> int:
        return int(self.get("event_id") or 0)

    @property
    def event_type(self) -> EventType:
        return EventType.from_name(str(self["event_type"]))

    @property
    def event_time(self) -> Timestamp:
        return Timestamp.fromisoformat(str(self["event_time"]))

    @property
    def attributes(self) -> Message:
        """This event's attributes, whatever its type (Temporal names them per type)."""
        return attributes_for(str(self["event_type"]), self.get("attributes"))

    def __getattr__(self, name: str) -> Any:
        """``<type>_event_attributes``: this event's attributes when the name is its type's;
        another type's name gives empty attributes, as an unset protobuf field does."""
        member = _ATTRIBUTE_FIELDS.get(name)
        if member is None:
            raise AttributeError(f"HistoryEvent has no attribute {name!r}")
        if member is self.event_type:
            return self.attributes
        return attributes_for(member.short_name, {})

    def HasField(self, name: str) -> bool:  # protobuf's name
        if name in _ATTRIBUTE_FIELDS:
            return _ATTRIBUTE_FIELDS[name] is self.event_type
        return self.get(name) is not None

    def WhichOneof(self, group: str) -> str | None:  # protobuf's name
        return self.event_type.attributes_field if group == "attributes" else None

    def to_wire(self) -> dict[str, Any]:
        """The event as the server's JSON (a plain dict)."""
        return dict(self)


def history_events(events: Iterable[Mapping[str, Any]]) -> list[HistoryEvent]:
    """``events`` as ``HistoryEvent`` (those that already are are kept as they are)."""
    return [event if isinstance(event, HistoryEvent) else HistoryEvent(event) for event in events]


@dataclass
class History:
    """A list of events (Temporal's ``History`` message)."""

    events: list[HistoryEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.events = history_events(self.events)


__all__ = [
    "ActivityTaskCompletedEventAttributes",
    "ActivityTaskFailedEventAttributes",
    "ActivityTaskScheduledEventAttributes",
    "ChildWorkflowExecutionCompletedEventAttributes",
    "Duration",
    "History",
    "HistoryEvent",
    "MarkerRecordedEventAttributes",
    "Message",
    "StartChildWorkflowExecutionInitiatedEventAttributes",
    "TimerFiredEventAttributes",
    "TimerStartedEventAttributes",
    "Timestamp",
    "WorkflowExecutionCompletedEventAttributes",
    "WorkflowExecutionFailedEventAttributes",
    "WorkflowExecutionSignaledEventAttributes",
    "WorkflowExecutionStartedEventAttributes",
    "WorkflowTaskCompletedEventAttributes",
    "history_events",
]
