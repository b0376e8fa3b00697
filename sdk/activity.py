"""Activity definitions and the calls an activity makes about itself while it runs.

The running activity's context lives in a ``contextvars.ContextVar``: the worker
sets it on the event loop for async activities and copies it into the executor
thread for sync ones, so ``info()``, ``heartbeat()`` and ``is_cancelled()`` work
the same in both.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar, overload

from sdk._logging import ContextLoggerAdapter
from sdk.converter import DefaultPayloadConverter, PayloadConverter
from sdk.exceptions import CancelledError

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ActivityDefinition:
    """What ``@activity.defn`` recorded about a function."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    no_thread_cancel_exception: bool = False


@overload
def defn(fn: F) -> F: ...


@overload
def defn(
    *, name: str | None = None, no_thread_cancel_exception: bool = False, dynamic: bool = False
) -> Callable[[F], F]: ...


def defn(
    fn: F | None = None,
    *,
    name: str | None = None,
    no_thread_cancel_exception: bool = False,
    dynamic: bool = False,
) -> F | Callable[[F], F]:
    """Mark a function as an activity, registered under ``name`` (default: its ``__name__``).

    A sync activity that was cancelled gets ``CancelledError`` from its next ``heartbeat()``
    (so it stops, and a worker shutting down does not wait on it), unless
    ``no_thread_cancel_exception``; it can also poll ``is_cancelled()``.
    """
    if dynamic:
        raise NotImplementedError("dynamic activities are not supported yet: register each name")

    def mark(target: F) -> F:
        activity_name = name or target.__name__
        is_async = asyncio.iscoroutinefunction(target)
        definition = ActivityDefinition(activity_name, target, is_async, no_thread_cancel_exception)
        target.__chronicle_activity_name__ = activity_name  # type: ignore[attr-defined]
        target.__chronicle_activity_definition__ = definition  # type: ignore[attr-defined]
        return target

    return mark(fn) if fn is not None else mark


def definition_of(fn: Callable[..., Any]) -> ActivityDefinition:
    """The recorded definition; a clear error for a function not marked with ``@activity.defn``.

    A method registered through its instance (``activities=[obj.method]``) is called bound,
    so it gets its ``self``; the decorator saw only the plain function.
    """
    if isinstance(fn, type):
        raise TypeError(f"{fn!r} is a class instead of an instance: register an instance's methods")
    found = getattr(fn, "__chronicle_activity_definition__", None)
    if not isinstance(found, ActivityDefinition):
        raise TypeError(f"{fn!r} is not an activity: decorate it with @activity.defn")
    if inspect.ismethod(fn):
        return dataclasses.replace(found, fn=fn)
    return found


@dataclass(frozen=True)
class Info:
    """Facts about the running activity attempt."""

    activity_id: str
    activity_type: str
    attempt: int
    task_token: bytes
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
    # A sync activity runs in a thread; its heartbeat raises CancelledError once cancelled
    # (unless its definition says not to, or the call is shielded).
    in_thread: bool = False
    raise_on_heartbeat: bool = False
    shielded: int = 0
    # The worker's client and converter, and its shutdown flag (set when it starts stopping).
    client: Any = None
    payload_converter: PayloadConverter = field(default_factory=DefaultPayloadConverter)
    worker_shutdown: threading.Event = field(default_factory=threading.Event)
    # With worker interceptors: their outbound chain, which ``info()`` and ``heartbeat()`` go through.
    outbound: Any = None

    def record_heartbeat(self, details: Sequence[Any]) -> None:
        """What ``heartbeat()`` does (the last link of an interceptor chain)."""
        self.heartbeat_sink(details)
        if self.raise_on_heartbeat and self.cancelled.is_set() and not self.shielded:
            raise CancelledError(self.cancel_reason or "Activity cancelled")

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


class _CompleteAsyncError(BaseException):
    """Unwinds an activity that will be completed later through its task token."""


def raise_complete_async() -> None:
    """End this activity without a result: it stays started until a client completes it with
    ``client.get_async_activity_handle(task_token=activity.info().task_token)``."""
    _context()
    raise _CompleteAsyncError()


@dataclass(frozen=True)
class ActivityCancellationDetails:
    """Why the activity was asked to stop (Temporal's shape; the server tells only a request)."""

    not_found: bool = False
    cancel_requested: bool = False
    paused: bool = False
    reset: bool = False
    timed_out: bool = False
    worker_shutdown: bool = False


def cancellation_details() -> ActivityCancellationDetails | None:
    """None until the attempt is asked to stop; then why, as far as the worker knows."""
    context = _context()
    if not context.cancelled.is_set():
        return None
    return ActivityCancellationDetails(cancel_requested=True)


def client() -> Any:
    """The worker's ``Client``, for async activities (as in Temporal, not from a sync one's thread)."""
    context = _context()
    if context.in_thread or context.client is None:
        raise RuntimeError("No client available: activity.client() works in async activities only")
    return context.client


def payload_converter() -> PayloadConverter:
    """The worker's payload converter (e.g. to decode details by hand)."""
    return _context().payload_converter


def is_worker_shutdown() -> bool:
    """True once the worker running this attempt has started shutting down."""
    return _context().worker_shutdown.is_set()


async def wait_for_worker_shutdown() -> None:
    flag = _context().worker_shutdown
    while not flag.is_set():
        await asyncio.sleep(0.1)


def wait_for_worker_shutdown_sync(timeout: float | None = None) -> bool:
    """Block a sync activity's thread until the worker shuts down or ``timeout``; True if it did."""
    return _context().worker_shutdown.wait(timeout)


def in_activity() -> bool:
    return _current.get(None) is not None


def info() -> Info:
    context = _context()
    return context.info if context.outbound is None else context.outbound.info()


def heartbeat(*details: Any) -> None:
    """Record progress; the worker throttles and batches these and reports cancellation back.

    In a sync activity that has been cancelled this raises ``CancelledError`` (Temporal raises
    it in the activity's thread), unless inside ``shield_thread_cancel_exception()``.
    """
    context = _context()
    if context.outbound is None:
        context.record_heartbeat(details)
    else:
        context.outbound.heartbeat(*details)


@contextlib.contextmanager
def shield_thread_cancel_exception() -> Iterator[None]:
    """Hold off a sync activity's ``CancelledError`` for this block (e.g. while cleaning up)."""
    context = _context()
    context.shielded += 1
    try:
        yield
    finally:
        context.shielded -= 1


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


def _log_details() -> dict[str, Any] | None:
    context = _current.get(None)
    if context is None:
        return None
    info = context.info
    return {
        "activity_id": info.activity_id,
        "activity_type": info.activity_type,
        "attempt": info.attempt,
        "namespace": info.workflow_namespace,
        "task_queue": info.task_queue,
        "workflow_id": info.workflow_id,
        "workflow_run_id": info.workflow_run_id,
        "workflow_type": info.workflow_type,
    }


class LoggerAdapter(ContextLoggerAdapter):
    """Logs with the running activity's ids in ``extra["temporal_activity"]`` and on the message."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, "temporal_activity", _log_details)

    # Temporal's names for the switches.
    activity_info_on_message = ContextLoggerAdapter.info_on_message_switch()
    activity_info_on_extra = ContextLoggerAdapter.info_on_extra_switch()


logger = LoggerAdapter(logging.getLogger("sdk.activity"))
