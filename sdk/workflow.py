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
from typing import Any, NoReturn, TypeVar, overload

from sdk._failure import failure_to_exception
from sdk._runtime.children import ChildState, ChildWorkflowCancellationType
from sdk._runtime.definition import (
    DEFINITION_ATTR,
    INIT_ATTR,
    QUERY_ATTR,
    RUN_ATTR,
    SIGNAL_ATTR,
    WorkflowDefinition,
    workflow_name,
)
from sdk._runtime.instance import ActivityState, ContinueAsNewRequest, WorkflowInstance
from sdk.common import RetryPolicy, WorkflowIDReusePolicy, to_seconds
from sdk.converter import return_hint
from sdk.search_attributes import SearchAttributesInput, search_attributes_to_wire

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
_current: list[WorkflowInstance] = []


@dataclass(frozen=True)
class ParentInfo:
    """The workflow that started this one as its child."""

    namespace: str
    run_id: str
    workflow_id: str


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
    cron_schedule: str = ""
    # As of the current workflow task (its WorkflowTaskStarted event).
    history_length: int = 0
    history_size: int = 0
    continue_as_new_suggested: bool = False
    parent: ParentInfo | None = None

    def get_current_history_length(self) -> int:
        """Events in the history so far, as of the current workflow task."""
        return _live(self).history_length

    def get_current_history_size(self) -> int:
        """The history's size in bytes, as of the current workflow task."""
        return _live(self).history_size

    def is_continue_as_new_suggested(self) -> bool:
        """True once the server says the history passed the namespace's suggestion threshold."""
        return _live(self).continue_as_new_suggested


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


def _live(info: Info) -> Info:
    """The running instance's current Info when ``info`` is a copy of it taken earlier."""
    if _current and _current[-1].info.run_id == info.run_id:
        return _current[-1].info
    return info


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


def has_last_completion_result() -> bool:
    """True in a cron run (or its retry) after an earlier run of the chain completed with a result."""
    return _instance().last_completion_result is not None


def get_last_completion_result(type_hint: Any = None) -> Any:
    """The result of the chain's last completed cron run, or None."""
    instance = _instance()
    return instance.converter.from_result(instance.last_completion_result, type_hint)


def get_last_failure() -> BaseException | None:
    """The failure of the run before this one (a retried or failed cron run), or None."""
    instance = _instance()
    failure = instance.continued_failure
    return failure_to_exception(failure, instance.converter) if failure else None


def continue_as_new(
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    workflow: Any = None,
    task_queue: str | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    backoff_start_interval: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    memo: dict[str, Any] | None = None,
    search_attributes: dict[str, Any] | None = None,
) -> NoReturn:
    """Close this run and start a fresh one with new arguments (raises; never returns).

    Unset options keep the current run's: workflow type, task queue and timeouts on
    the server; memo, search attributes (with upserts) and retry policy here, as
    Temporal's SDKs do.
    """
    instance = _instance()
    info = instance.info
    converter = instance.converter
    values = list(args) if args else ([] if arg is None else [arg])
    policy = retry_policy or info.retry_policy
    attributes: dict[str, Any] = {
        "workflow_type": {"name": workflow_name(workflow) if workflow else info.workflow_type},
        "task_queue": {"name": task_queue or info.task_queue},
        "input": converter.to_payloads(values),
        "workflow_run_timeout": to_seconds(run_timeout),
        "workflow_task_timeout": to_seconds(task_timeout),
        "backoff_start_interval": to_seconds(backoff_start_interval),
        "memo": dict(info.memo) if memo is None else {k: converter.to_payload(v) for k, v in memo.items()},
        "search_attributes": dict(info.search_attributes if search_attributes is None else search_attributes),
        "retry_policy": policy.to_wire() if policy else None,
    }
    raise ContinueAsNewRequest(attributes)


class _ReplaySilentFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_current and _current[-1].is_replaying)


logger = logging.getLogger("sdk.workflow")
logger.addFilter(_ReplaySilentFilter())


# -- child workflows and other workflows ---------------------------------------------------------


class ParentClosePolicy(IntEnum):
    """What happens to a child when its parent closes (Temporal's names; TERMINATE by default)."""

    UNSPECIFIED = 0
    TERMINATE = 1
    ABANDON = 2
    REQUEST_CANCEL = 3


def _signal_name(signal: Any) -> str:
    return signal if isinstance(signal, str) else str(getattr(signal, SIGNAL_ATTR, None) or signal.__name__)


_WAIT_COMPLETED = ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED


class ChildWorkflowHandle(asyncio.Task[Any]):
    """A started child: await it for its result; cancel it to cancel the child."""

    def __init__(
        self,
        instance: WorkflowInstance,
        state: ChildState,
        cancellation_type: ChildWorkflowCancellationType,
    ) -> None:
        super().__init__(_await_child(state, cancellation_type), loop=instance.loop)
        self._instance = instance
        self._child = state
        self._cancellation_type = cancellation_type

    def cancel(self, msg: Any = None) -> bool:
        """Ask the server to cancel the child; with WAIT_CANCELLATION_COMPLETED keep awaiting its close."""
        if self.done():
            return False
        self._instance.cancel_child(self._child, self._cancellation_type)
        if self._cancellation_type == ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED:
            return True
        return super().cancel(msg)

    @property
    def id(self) -> str:
        return self._child.workflow_id

    @property
    def first_execution_run_id(self) -> str:
        return self._child.run_id

    async def signal(self, signal: Any, arg: Any = None, *, args: Sequence[Any] = ()) -> None:
        """Signal the child (SignalExternalWorkflowExecution, child only)."""
        values = list(args) if args else ([] if arg is None else [arg])
        await _instance().signal_external(
            self.id, self._child.run_id, _signal_name(signal), values, child_workflow_only=True
        )


async def start_child_workflow(
    workflow: Any,
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    id: str | None = None,
    task_queue: str | None = None,
    result_type: Any = None,
    cancellation_type: ChildWorkflowCancellationType = _WAIT_COMPLETED,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.TERMINATE,
    execution_timeout: timedelta | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    retry_policy: RetryPolicy | None = None,
    memo: dict[str, Any] | None = None,
    search_attributes: dict[str, Any] | None = None,
) -> ChildWorkflowHandle:
    """Start a child workflow; returns once the server has started it.

    Raises WorkflowAlreadyStartedError when the id is in use.
    """
    instance = _instance()
    policy = (
        parent_close_policy
        if parent_close_policy != ParentClosePolicy.UNSPECIFIED
        else ParentClosePolicy.TERMINATE
    )
    options: dict[str, Any] = {
        "workflow_id": id or str(uuid4()),
        "task_queue": task_queue,
        "workflow_execution_timeout": to_seconds(execution_timeout),
        "workflow_run_timeout": to_seconds(run_timeout),
        "workflow_task_timeout": to_seconds(task_timeout),
        "parent_close_policy": f"PARENT_CLOSE_POLICY_{policy.name}",
        "workflow_id_reuse_policy": f"WORKFLOW_ID_REUSE_POLICY_{id_reuse_policy.value}",
        "retry_policy": retry_policy.to_wire() if retry_policy else None,
        "memo": memo or {},
        "search_attributes": search_attributes or {},
    }
    hint = result_type if result_type is not None or isinstance(workflow, str) else _run_hint(workflow)
    values = list(args) if args else ([] if arg is None else [arg])
    state = instance.start_child(workflow_name(workflow), values, options, hint)
    try:
        await state.started
    except asyncio.CancelledError:
        instance.cancel_child(state, cancellation_type)
        raise
    return ChildWorkflowHandle(instance, state, cancellation_type)


def _run_hint(workflow: Any) -> Any:
    """The result type of a run method, or of a workflow class's run method."""
    if isinstance(workflow, type):
        definition = getattr(workflow, DEFINITION_ATTR, None)
        return return_hint(definition.run_fn) if definition is not None else None
    return return_hint(workflow)


async def _await_child(state: ChildState, cancellation_type: ChildWorkflowCancellationType) -> Any:
    """The handle's body; ``ChildWorkflowHandle.cancel`` has already asked for the child's cancel."""
    try:
        return await state.result
    except asyncio.CancelledError:
        if (
            cancellation_type == ChildWorkflowCancellationType.WAIT_CANCELLATION_REQUESTED
            and state.cancel_requested
        ):
            await state.cancel_requested
        raise


async def execute_child_workflow(workflow: Any, arg: Any = None, **options: Any) -> Any:
    """Start a child workflow and wait for its result (raises ChildWorkflowError on failure)."""
    handle = await start_child_workflow(workflow, arg, **options)
    return await handle


@dataclass(frozen=True)
class ExternalWorkflowHandle:
    """Another workflow this one can signal or cancel (it need not be a child)."""

    id: str
    run_id: str | None = None

    async def signal(self, signal: Any, arg: Any = None, *, args: Sequence[Any] = ()) -> None:
        values = list(args) if args else ([] if arg is None else [arg])
        await _instance().signal_external(self.id, self.run_id, _signal_name(signal), values)

    async def cancel(self, *, reason: str = "") -> None:
        await _instance().request_cancel_external(self.id, self.run_id, reason=reason)


def get_external_workflow_handle(workflow_id: str, *, run_id: str | None = None) -> ExternalWorkflowHandle:
    _instance()  # only from workflow code
    return ExternalWorkflowHandle(workflow_id, run_id)
