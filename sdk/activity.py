"""Activity definitions and the calls an activity makes about itself while it runs.

The running activity's context lives in a ``contextvars.ContextVar``: the worker
sets it on the event loop for async activities and copies it into the executor
thread for sync ones, so ``info()``, ``heartbeat()`` and ``is_cancelled()`` work
the same in both.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar, overload

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ActivityDefinition:
    """What ``@activity.defn`` recorded about a function."""

    name: str
    fn: Callable[..., Any]
    is_async: bool


@overload
def defn(fn: F) -> F: ...


@overload
def defn(*, name: str | None = None) -> Callable[[F], F]: ...


def defn(fn: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
    """Mark a function as an activity, registered under ``name`` (default: its ``__name__``)."""

    def mark(target: F) -> F:
        activity_name = name or target.__name__
        definition = ActivityDefinition(activity_name, target, asyncio.iscoroutinefunction(target))
        target.__chronicle_activity_name__ = activity_name  # type: ignore[attr-defined]
        target.__chronicle_activity_definition__ = definition  # type: ignore[attr-defined]
        return target

    return mark(fn) if fn is not None else mark


def definition_of(fn: Callable[..., Any]) -> ActivityDefinition:
    """The recorded definition; a clear error for a function not marked with ``@activity.defn``."""
    found = getattr(fn, "__chronicle_activity_definition__", None)
    if not isinstance(found, ActivityDefinition):
        raise TypeError(f"{fn!r} is not an activity: decorate it with @activity.defn")
    return found


@dataclass(frozen=True)
class Info:
    """Facts about the running activity attempt."""

    activity_id: str
    activity_type: str
    attempt: int
    task_token: str
    task_queue: str
    workflow_id: str
    workflow_run_id: str
    workflow_type: str
    workflow_namespace: str
    heartbeat_details: Sequence[Any]
    scheduled_time: datetime | None
    current_attempt_scheduled_time: datetime | None
    started_time: datetime | None
    schedule_to_close_timeout: timedelta | None
    start_to_close_timeout: timedelta | None
    heartbeat_timeout: timedelta | None
    is_local: bool = False


@dataclass
class ActivityContext:
    """The worker's handle on one running attempt: heartbeat sink and cancellation flag."""

    info: Info
    heartbeat_sink: Callable[[Sequence[Any]], None]
    cancelled: threading.Event = field(default_factory=threading.Event)
    cancel_reason: str = ""

    def request_cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        self.cancelled.set()


_current: contextvars.ContextVar[ActivityContext] = contextvars.ContextVar("chronicle_activity")


def _context() -> ActivityContext:
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("not in an activity: this call only works inside a running activity") from None


def set_context(context: ActivityContext) -> contextvars.Token[ActivityContext]:
    """For the worker: bind ``context`` as the current activity."""
    return _current.set(context)


def in_activity() -> bool:
    return _current.get(None) is not None


def info() -> Info:
    return _context().info


def heartbeat(*details: Any) -> None:
    """Record progress; the worker throttles and batches these and reports cancellation back."""
    _context().heartbeat_sink(details)


def is_cancelled() -> bool:
    """True once the server asked for this attempt to stop (sync activities poll this)."""
    return _context().cancelled.is_set()


async def wait_for_cancelled() -> None:
    """Wait (on the loop) until the attempt is asked to stop."""
    flag = _context().cancelled
    while not flag.is_set():
        await asyncio.sleep(0.1)


def wait_for_cancelled_sync(timeout: float | None = None) -> bool:
    """Block a sync activity's thread until cancelled or ``timeout``; True if cancelled."""
    return _context().cancelled.wait(timeout)
