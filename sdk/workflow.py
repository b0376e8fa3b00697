"""The API workflow code uses: decorators, activities, timers, conditions, deterministic helpers.

Every function here must be called from workflow code (inside a running ``WorkflowInstance``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid as _uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Any, TypeVar, overload

from sdk._runtime.definition import (
    DEFINITION_ATTR,
    INIT_ATTR,
    QUERY_ATTR,
    RUN_ATTR,
    SIGNAL_ATTR,
    WorkflowDefinition,
)
from sdk._runtime.instance import ActivityState, ContinueAsNewRequest, WorkflowInstance
from sdk.common import RetryPolicy, to_seconds
from sdk.converter import return_hint
from sdk.search_attributes import SearchAttributesInput, search_attributes_to_wire

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
_current: list[WorkflowInstance] = []


@dataclass(frozen=True)
class Info:
    """What the run knows about itself (from its WorkflowExecutionStarted event)."""

    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    namespace: str
    start_time: datetime
    attempt: int = 1
    run_timeout: timedelta | None = None
    execution_timeout: timedelta | None = None
    task_timeout: timedelta | None = None
    continued_run_id: str | None = None
    first_execution_run_id: str | None = None
    retry_policy: RetryPolicy | None = None
    memo: dict[str, Any] = field(default_factory=dict)
    search_attributes: dict[str, Any] = field(default_factory=dict)
    history_length: int = 0

    def is_continue_as_new_suggested(self) -> bool:
        return self.history_length > 10_000


class ActivityCancellationType(IntEnum):
    TRY_CANCEL = 0
    WAIT_CANCELLATION_COMPLETED = 1
    ABANDON = 2


@contextlib.contextmanager
def _bound(instance: WorkflowInstance) -> Iterator[None]:
    _current.append(instance)
    try:
        yield
    finally:
        _current.pop()


def _instance() -> WorkflowInstance:
    if not _current:
        raise RuntimeError("not in workflow code")
    return _current[-1]


# -- decorators ---------------------------------------------------------------------------------


@overload
def defn(cls: type[T]) -> type[T]: ...


@overload
def defn(*, name: str | None = None) -> Callable[[type[T]], type[T]]: ...


def defn(cls: type[T] | None = None, *, name: str | None = None) -> Any:
    """Mark a class as a workflow; ``name`` defaults to the class name."""

    def decorate(target: type[T]) -> type[T]:
        setattr(target, DEFINITION_ATTR, WorkflowDefinition.build(target, name))
        return target

    return decorate(cls) if cls is not None else decorate


def run(fn: F) -> F:
    setattr(fn, RUN_ATTR, True)
    return fn


def init(fn: F) -> F:
    """Mark ``__init__`` as taking the workflow's arguments."""
    setattr(fn, INIT_ATTR, True)
    return fn


def _named(attr: str, fn: F | None, name: str | None) -> Any:
    def decorate(target: F) -> F:
        setattr(target, attr, name or target.__name__)
        return target

    return decorate(fn) if fn is not None else decorate


@overload
def signal(fn: F) -> F: ...


@overload
def signal(*, name: str | None = None) -> Callable[[F], F]: ...


def signal(fn: F | None = None, *, name: str | None = None) -> Any:
    return _named(SIGNAL_ATTR, fn, name)


@overload
def query(fn: F) -> F: ...


@overload
def query(*, name: str | None = None) -> Callable[[F], F]: ...


def query(fn: F | None = None, *, name: str | None = None) -> Any:
    return _named(QUERY_ATTR, fn, name)


# -- activities ---------------------------------------------------------------------------------


def _activity_name(activity: Any) -> str:
    if isinstance(activity, str):
        return activity
    return str(getattr(activity, "__chronicle_activity_name__", activity.__name__))


def start_activity(
    activity: Any,
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    task_queue: str | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
    activity_id: str | None = None,
    result_type: Any = None,
) -> asyncio.Task[Any]:
    """Schedule an activity now (ScheduleActivityTask); the task resolves to its result."""
    if schedule_to_close_timeout is None and start_to_close_timeout is None:
        raise ValueError("schedule_to_close_timeout or start_to_close_timeout is required")
    instance = _instance()
    options: dict[str, Any] = {
        "activity_id": activity_id,
        "task_queue": task_queue,
        "schedule_to_close_timeout": to_seconds(schedule_to_close_timeout),
        "schedule_to_start_timeout": to_seconds(schedule_to_start_timeout),
        "start_to_close_timeout": to_seconds(start_to_close_timeout),
        "heartbeat_timeout": to_seconds(heartbeat_timeout),
        "retry_policy": retry_policy.to_wire() if retry_policy else None,
    }
    hint = result_type if result_type is not None or isinstance(activity, str) else return_hint(activity)
    values = list(args) if args else ([] if arg is None else [arg])
    state = instance.schedule_activity(_activity_name(activity), values, options, hint)
    return instance.loop.create_task(_await_activity(instance, state, cancellation_type))


async def _await_activity(
    instance: WorkflowInstance, state: ActivityState, cancellation_type: ActivityCancellationType
) -> Any:
    try:
        return await state.future
    except asyncio.CancelledError:
        wait = cancellation_type == ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        abandon = cancellation_type == ActivityCancellationType.ABANDON
        instance.cancel_activity(state, wait=wait, abandon=abandon)
        if wait and not state.future.done() and state.scheduled_event_id:
            with contextlib.suppress(Exception):
                await state.future
        raise


async def execute_activity(activity: Any, arg: Any = None, **options: Any) -> Any:
    """Schedule an activity and wait for its result (raises ActivityError on failure)."""
    return await start_activity(activity, arg, **options)


async def execute_local_activity(
    activity: Any,
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    schedule_to_close_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    result_type: Any = None,
) -> Any:
    """Run a short activity inside the worker; its outcome is recorded as a marker."""
    if schedule_to_close_timeout is None and start_to_close_timeout is None:
        raise ValueError("schedule_to_close_timeout or start_to_close_timeout is required")
    options = {
        "schedule_to_close_timeout": to_seconds(schedule_to_close_timeout),
        "start_to_close_timeout": to_seconds(start_to_close_timeout),
        "retry_policy": retry_policy.to_wire() if retry_policy else None,
    }
    hint = result_type if result_type is not None or isinstance(activity, str) else return_hint(activity)
    values = list(args) if args else ([] if arg is None else [arg])
    return await _instance().start_local_activity(_activity_name(activity), values, options, hint)


def start_local_activity(activity: Any, arg: Any = None, **options: Any) -> asyncio.Task[Any]:
    return _instance().loop.create_task(execute_local_activity(activity, arg, **options))


# -- time, conditions, determinism ---------------------------------------------------------------


async def sleep(duration: timedelta | float) -> None:
    """A durable timer (StartTimer)."""
    await asyncio.sleep(to_seconds(duration) or 0)


async def wait_condition(fn: Callable[[], bool], *, timeout: timedelta | float | None = None) -> None:
    """Wait until ``fn()`` is true; raises asyncio.TimeoutError after ``timeout`` (a durable timer)."""
    waiter = _instance().wait_condition(fn)
    if timeout is None:
        await waiter
    else:
        await asyncio.wait_for(waiter, to_seconds(timeout))


def now() -> datetime:
    """The workflow's clock: the start time of the current workflow task."""
    return _instance().current_time


def time() -> float:
    return _instance().loop.time()


def info() -> Info:
    return _instance().info


def random() -> Any:
    """A random.Random seeded from the run, identical on every replay."""
    return _instance().random


def uuid4() -> _uuid.UUID:
    return _uuid.UUID(int=random().getrandbits(128), version=4)


def patched(patch_id: str) -> bool:
    """True on new code paths (and on replays of runs that took them); records a marker."""
    return _instance().patched(patch_id)


def deprecate_patch(patch_id: str) -> None:
    _instance().patched(patch_id, deprecated=True)


def upsert_search_attributes(attributes: SearchAttributesInput) -> None:
    """Merge attributes into the run's: a list of ``SearchAttributeKey.value_set(v)`` /
    ``value_unset()`` updates, or the dict form ``{"Name": [value]}`` (an empty list removes)."""
    _instance().upsert_search_attributes(search_attributes_to_wire(attributes))


def memo() -> dict[str, Any]:
    return dict(_instance().info.memo)


def continue_as_new(
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    task_queue: str | None = None,
    run_timeout: timedelta | None = None,
    workflow: Any = None,
) -> Any:
    """Close this run and start a fresh one with new arguments (raises; never returns)."""
    instance = _instance()
    values = list(args) if args else ([] if arg is None else [arg])
    workflow_type = workflow if isinstance(workflow, str) else instance.info.workflow_type
    raise ContinueAsNewRequest(
        {
            "workflow_type": {"name": workflow_type},
            "task_queue": {"name": task_queue or instance.info.task_queue},
            "input": instance.converter.to_payloads(values),
            "workflow_run_timeout": to_seconds(run_timeout),
        }
    )


class _ReplaySilentFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_current and _current[-1].is_replaying)


logger = logging.getLogger("sdk.workflow")
logger.addFilter(_ReplaySilentFilter())
