"""The boundary between workflow code and the engine that runs it.

``sdk.workflow``'s functions never reach into the engine (``sdk._runtime``): they ask the
``_Runtime`` installed for the run being activated, an interface the engine implements (as
Temporal's SDK does with ``workflow._Runtime``). The types that cross the boundary live here
too: what a run knows about itself (``Info``), the cancellation choices workflow code hands
the engine, the handle the engine returns for a child, and the exception that continues a
run as new. So the engine imports this package, and this package imports no engine code.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Any, NoReturn, TypeVar

from sdk.common import RetryPolicy
from sdk.converter import DataConverter
from sdk.workflow import _guard
from sdk.workflow._definition import signal_name

T = TypeVar("T")


@dataclass(frozen=True)
class UpdateInfo:
    """The update whose handler (or validator) is running: ``workflow.current_update_info()``."""

    id: str
    name: str


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


def _live(info: Info) -> Info:
    """The running run's current Info when ``info`` is a copy of it taken earlier."""
    runtime = _Runtime.maybe_current()
    if runtime is not None and runtime.workflow_info().run_id == info.run_id:
        return runtime.workflow_info()
    return info


class ActivityCancellationType(IntEnum):
    """What cancelling an activity's task waits for (Temporal's names; TRY_CANCEL by default)."""

    TRY_CANCEL = 0
    WAIT_CANCELLATION_COMPLETED = 1
    ABANDON = 2


class ChildWorkflowCancellationType(IntEnum):
    """What cancelling a child's task waits for (Temporal's names and default)."""

    ABANDON = 0
    TRY_CANCEL = 1
    WAIT_CANCELLATION_COMPLETED = 2
    WAIT_CANCELLATION_REQUESTED = 3


class ChildWorkflowHandle(asyncio.Task[Any]):
    """A started child: await it for its result; cancel it to cancel the child.

    ``start_child_workflow`` returns the engine's subclass, which knows the child's
    identity and what cancelling it means; this class is what workflow code relies on.
    """

    @property
    def id(self) -> str:
        raise NotImplementedError

    @property
    def first_execution_run_id(self) -> str:
        raise NotImplementedError

    async def signal(self, signal: Any, arg: Any = None, *, args: Sequence[Any] = ()) -> None:
        """Signal the child (SignalExternalWorkflowExecution, child only)."""
        values = list(args) if args else ([] if arg is None else [arg])
        await _Runtime.current().workflow_signal_external(
            self.id, self.first_execution_run_id, signal_name(signal), values, child_workflow_only=True
        )


class ContinueAsNewError(BaseException):
    """Raised by ``workflow.continue_as_new`` to unwind the run method with the new run's
    attributes; the engine closes the run with them. A BaseException, so workflow code's
    ``except Exception`` does not swallow it."""

    def __init__(self, attributes: dict[str, Any]) -> None:
        super().__init__("continue as new")
        self.attributes = attributes


# The runtimes of the runs being activated, innermost last. A stack rather than a ContextVar:
# asyncio tasks copy the context they were created in, and a run's main task is created
# before the engine installs itself for the first pass of its code. Activations run one at a
# time, synchronously, so the innermost entry is always the run whose code is executing.
_installed: list[_Runtime] = []


class _Runtime(ABC):
    """What workflow code may ask of the engine running it; see the module docstring."""

    @staticmethod
    def current() -> _Runtime:
        """The runtime of the run whose code is executing; raises outside workflow code."""
        if not _installed:
            raise RuntimeError("not in workflow code")
        return _installed[-1]

    @staticmethod
    def maybe_current() -> _Runtime | None:
        return _installed[-1] if _installed else None

    # Whether the determinism guard (``_guard``) applies while this run's code executes.
    determinism_guard = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Make this the current runtime while the engine runs the run's code."""
        _installed.append(self)
        try:
            with _guard.active() if self.determinism_guard else contextlib.nullcontext():
                yield
        finally:
            _installed.pop()

    # -- what the run knows ------------------------------------------------------------------

    @abstractmethod
    def workflow_info(self) -> Info: ...

    @abstractmethod
    def workflow_is_replaying(self) -> bool: ...

    @abstractmethod
    def workflow_now(self) -> datetime:
        """The start time of the current workflow task (the workflow's clock)."""

    @abstractmethod
    def workflow_time(self) -> float:
        """The workflow loop's time in seconds."""

    @abstractmethod
    def workflow_random(self) -> random.Random:
        """Seeded from the run, so every replay draws the same numbers."""

    @abstractmethod
    def workflow_data_converter(self) -> DataConverter: ...

    @abstractmethod
    def workflow_last_completion_result(self, type_hint: Any) -> Any:
        """The previous run's result in a cron chain (None when there is none)."""

    @abstractmethod
    def workflow_has_last_completion_result(self) -> bool: ...

    @abstractmethod
    def workflow_last_failure(self) -> BaseException | None:
        """The failure the previous run of a retry or cron chain closed with."""

    @abstractmethod
    def workflow_is_read_only(self) -> bool:
        """True while a query handler runs: issuing a command raises ReadOnlyContextError."""

    # -- handlers -----------------------------------------------------------------------------
    # ``name`` None means the dynamic handler; a None handler removes one.

    @abstractmethod
    def workflow_set_signal_handler(self, name: str | None, handler: Callable[..., Any] | None) -> None: ...

    @abstractmethod
    def workflow_get_signal_handler(self, name: str | None) -> Callable[..., Any] | None: ...

    @abstractmethod
    def workflow_set_query_handler(self, name: str | None, handler: Callable[..., Any] | None) -> None: ...

    @abstractmethod
    def workflow_get_query_handler(self, name: str | None) -> Callable[..., Any] | None: ...

    @abstractmethod
    def workflow_set_update_handler(
        self, name: str | None, handler: Callable[..., Any] | None, validator: Callable[..., Any] | None
    ) -> None: ...

    @abstractmethod
    def workflow_get_update_handler(self, name: str | None) -> Callable[..., Any] | None: ...

    @abstractmethod
    def workflow_current_update_info(self) -> UpdateInfo | None: ...

    @abstractmethod
    def workflow_all_handlers_finished(self) -> bool:
        """True when no async signal or update handler is still running."""

    # -- what the run does -------------------------------------------------------------------

    @abstractmethod
    def workflow_create_task(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A task on the workflow's deterministic loop."""

    @abstractmethod
    async def workflow_wait_condition(self, check: Callable[[], bool]) -> None:
        """Return once ``check()`` holds; it is re-checked after every pass of the loop."""

    @abstractmethod
    def workflow_patched(self, patch_id: str, *, deprecated: bool = False) -> bool: ...

    @abstractmethod
    def workflow_upsert_search_attributes(self, attributes: dict[str, Any]) -> None:
        """Merge wire-form attributes into the run's (a None or empty value removes one)."""

    @abstractmethod
    def workflow_start_activity(
        self,
        activity_type: str,
        args: list[Any],
        options: dict[str, Any],
        result_hint: Any,
        cancellation_type: ActivityCancellationType,
    ) -> asyncio.Task[Any]:
        """Schedule the activity now; the task resolves to its result."""

    @abstractmethod
    def workflow_start_local_activity(
        self, activity_type: str, args: list[Any], options: dict[str, Any], result_hint: Any
    ) -> asyncio.Future[Any]:
        """Run the activity in the worker (or take its recorded marker on replay)."""

    @abstractmethod
    async def workflow_start_child_workflow(
        self,
        workflow_type: str,
        args: list[Any],
        options: dict[str, Any],
        result_hint: Any,
        cancellation_type: ChildWorkflowCancellationType,
    ) -> ChildWorkflowHandle:
        """Start a child; returns once the server has started it."""

    def workflow_continue_as_new(self, attributes: dict[str, Any], args: list[Any]) -> NoReturn:
        """Close the run as continued-as-new with ``attributes`` (whose ``input`` encodes
        ``args``); an engine with interceptors hands them the request first."""
        raise ContinueAsNewError(attributes)

    @abstractmethod
    def workflow_signal_external(
        self,
        workflow_id: str,
        run_id: str | None,
        signal_name: str,
        args: list[Any],
        *,
        child_workflow_only: bool = False,
    ) -> Awaitable[None]: ...

    @abstractmethod
    def workflow_request_cancel_external(
        self, workflow_id: str, run_id: str | None, *, child_workflow_only: bool = False, reason: str = ""
    ) -> Awaitable[None]: ...
