"""Event attributes read like Temporal's messages, over the server's JSON (a dict underneath).

Every part of an event is a ``Message``: a dict (so it serialises, compares and indexes as
the JSON it came from) whose fields also read as attributes, typed by what the field is:
``*_timeout`` / ``*_interval`` / ``*_backoff`` seconds become ``timedelta``, ``*_time``
text becomes ``datetime``, ``failure`` becomes ``sdk.api.failure.v1.Failure``, nested
objects become ``Message``. Payload lists (``input``, ``result``, ``details``) stay the
server's JSON payloads, which ``DataConverter.from_payloads`` decodes. The classes below
name the common attribute sets and type their fields for a type checker; any other event's
attributes are a plain ``Message``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Generic, TypeVar, overload

from sdk.api.failure.v1 import Failure

T = TypeVar("T")
_DURATION_SUFFIXES = ("_timeout", "_interval", "_backoff")


class Duration(timedelta):
    """A ``timedelta`` that also answers protobuf's ``Duration`` methods, which ported code calls."""

    def ToTimedelta(self) -> timedelta:
        return timedelta(seconds=self.total_seconds())

    def ToSeconds(self) -> int:
        return int(self.total_seconds())

    def ToMilliseconds(self) -> int:
        return int(self.total_seconds() * 1000)

    def ToJsonString(self) -> str:
        return f"{self.total_seconds():g}s"


class Timestamp(datetime):
    """A ``datetime`` that also answers protobuf's ``Timestamp`` methods (``event_time.ToDatetime()``)."""

    def ToDatetime(self, tzinfo: tzinfo | None = None) -> datetime:
        """Naive UTC without ``tzinfo``, as protobuf's is; aware in ``tzinfo`` with it."""
        moment = datetime.fromisoformat(self.isoformat())
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(tzinfo) if tzinfo else moment.astimezone(UTC).replace(tzinfo=None)

    def ToJsonString(self) -> str:
        return self.ToDatetime(UTC).isoformat().replace("+00:00", "Z")


def _duration(value: Any) -> Duration | None:
    return None if value is None or value == "" else Duration(seconds=float(value))


def _time(value: Any) -> Timestamp | None:
    return Timestamp.fromisoformat(value) if isinstance(value, str) and value else None


def _failure(value: Any) -> Failure | None:
    return Failure(value) if isinstance(value, dict) and value else None


def _typed(name: str, value: Any) -> Any:
    """A field's value as Temporal's message would type it (see the module docstring)."""
    if isinstance(value, dict):
        return _failure(value) if name == "failure" or name.endswith("_failure") else Message(value)
    if isinstance(value, list):
        return [_typed(name, item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool) and name.endswith(_DURATION_SUFFIXES):
        return _duration(value)
    if isinstance(value, str) and name.endswith("_time"):
        return _time(value)
    return value


class Message(dict[str, Any]):
    """A JSON object of an event, with protobuf-style attribute access to its fields."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self:
            fields = ", ".join(sorted(self)) or "none"
            raise AttributeError(f"{type(self).__name__} has no field {name!r} (fields: {fields})")
        return _typed(name, self[name])

    def HasField(self, name: str) -> bool:  # protobuf's name
        return self.get(name) not in (None, {}, [])


class _Field(Generic[T]):
    """A typed field of a named attribute set (what ``Message.__getattr__`` does, for mypy)."""

    def __init__(self, read: Callable[[Any], T]) -> None:
        self.read = read
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Field[T]: ...

    @overload
    def __get__(self, obj: Message, owner: type | None = None) -> T: ...

    def __get__(self, obj: Message | None, owner: type | None = None) -> _Field[T] | T:
        if obj is None:
            return self
        return self.read(obj.get(self.name))


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any) -> int:
    return int(value or 0)


def _message(value: Any) -> Message:
    return Message(value if isinstance(value, dict) else {})


def _payloads(value: Any) -> list[dict[str, Any]]:
    return list(value or [])


class WorkflowExecutionStartedEventAttributes(Message):
    workflow_type = _Field(_message)
    task_queue = _Field(_message)
    input = _Field(_payloads)
    attempt = _Field(_int)
    identity = _Field(_text)
    original_execution_run_id = _Field(_text)
    first_execution_run_id = _Field(_text)
    continued_execution_run_id = _Field(_text)
    workflow_execution_timeout = _Field(_duration)
    workflow_run_timeout = _Field(_duration)
    workflow_task_timeout = _Field(_duration)
    cron_schedule = _Field(_text)


class WorkflowExecutionCompletedEventAttributes(Message):
    result = _Field(_payloads)
    workflow_task_completed_event_id = _Field(_int)


class WorkflowExecutionFailedEventAttributes(Message):
    failure = _Field(_failure)
    workflow_task_completed_event_id = _Field(_int)


class WorkflowExecutionSignaledEventAttributes(Message):
    signal_name = _Field(_text)
    input = _Field(_payloads)
    identity = _Field(_text)


class WorkflowTaskCompletedEventAttributes(Message):
    scheduled_event_id = _Field(_int)
    started_event_id = _Field(_int)
    identity = _Field(_text)


class ActivityTaskScheduledEventAttributes(Message):
    activity_id = _Field(_text)
    activity_type = _Field(_message)
    task_queue = _Field(_message)
    input = _Field(_payloads)
    schedule_to_close_timeout = _Field(_duration)
    schedule_to_start_timeout = _Field(_duration)
    start_to_close_timeout = _Field(_duration)
    heartbeat_timeout = _Field(_duration)
    workflow_task_completed_event_id = _Field(_int)


class ActivityTaskCompletedEventAttributes(Message):
    result = _Field(_payloads)
    scheduled_event_id = _Field(_int)
    started_event_id = _Field(_int)


class ActivityTaskFailedEventAttributes(Message):
    failure = _Field(_failure)
    scheduled_event_id = _Field(_int)
    started_event_id = _Field(_int)


class TimerStartedEventAttributes(Message):
    timer_id = _Field(_text)
    start_to_fire_timeout = _Field(_duration)
    workflow_task_completed_event_id = _Field(_int)


class TimerFiredEventAttributes(Message):
    timer_id = _Field(_text)
    started_event_id = _Field(_int)


class MarkerRecordedEventAttributes(Message):
    marker_name = _Field(_text)
    failure = _Field(_failure)
    workflow_task_completed_event_id = _Field(_int)


class StartChildWorkflowExecutionInitiatedEventAttributes(Message):
    workflow_id = _Field(_text)
    workflow_type = _Field(_message)
    task_queue = _Field(_message)
    input = _Field(_payloads)
    workflow_task_completed_event_id = _Field(_int)


class ChildWorkflowExecutionCompletedEventAttributes(Message):
    result = _Field(_payloads)
    workflow_execution = _Field(_message)
    workflow_type = _Field(_message)
    initiated_event_id = _Field(_int)


NAMED = {
    cls.__name__.removesuffix("EventAttributes"): cls
    for cls in (
        WorkflowExecutionStartedEventAttributes,
        WorkflowExecutionCompletedEventAttributes,
        WorkflowExecutionFailedEventAttributes,
        WorkflowExecutionSignaledEventAttributes,
        WorkflowTaskCompletedEventAttributes,
        ActivityTaskScheduledEventAttributes,
        ActivityTaskCompletedEventAttributes,
        ActivityTaskFailedEventAttributes,
        TimerStartedEventAttributes,
        TimerFiredEventAttributes,
        MarkerRecordedEventAttributes,
        StartChildWorkflowExecutionInitiatedEventAttributes,
        ChildWorkflowExecutionCompletedEventAttributes,
    )
}


def attributes_for(short_name: str, wire: dict[str, Any] | None) -> Message:
    """The event's attributes as their named class (``Message`` for the others)."""
    return NAMED.get(short_name, Message)(wire or {})
