"""Worker interceptors (Temporal's ``temporalio.worker.Interceptor`` API; ``sdk.worker``
re-exports the names).

A worker's interceptors are the client's that are also ``sdk.worker.Interceptor``, then its
own ``interceptors=``; the first is outermost. For each activity attempt the worker builds
the chain ``intercept_activity(...)`` around its own inbound link and calls ``init`` with
its outbound link (``activity.info()`` and ``activity.heartbeat()`` go through it). For each
workflow run it instantiates every ``workflow_interceptor_class(...)``, innermost last, and
calls ``init`` likewise; the run's code then reaches the engine through the outbound chain
(``workflow.info()``, activities, children, signals to other workflows, continue-as-new), and
the engine runs the run method and every handler through the inbound chain. A workflow's
interceptors are part of its code: they run on its deterministic loop, again on replay.

Headers travel where the server carries them: an activity's (``start_activity`` ->
``execute_activity``), a child's and a continued run's (``start_child_workflow`` /
``continue_as_new`` -> ``execute_workflow``), and an update's (the client's
``start_workflow_update`` -> ``handle_update_*``). A workflow started by a client, a signal
and a query have none yet (the server's start, signal and query requests take no header).
Nexus is not supported.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Coroutine, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NoReturn

from sdk import activity, workflow
from sdk.api.common.v1 import Payload
from sdk.common import RetryPolicy, WorkflowIDReusePolicy
from sdk.converter import payload_from_wire, payload_to_wire
from sdk.workflow import (
    ActivityCancellationType,
    ChildWorkflowCancellationType,
    ChildWorkflowHandle,
    ParentClosePolicy,
)


class Interceptor:
    """A worker interceptor: override what to wrap; the defaults wrap nothing."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Return the link that runs each activity attempt before ``next``."""
        return next

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        """The class instantiated (with the next inbound link) for each workflow run, or None."""
        return None


@dataclass(frozen=True)
class WorkflowInterceptorClassInput:
    """Input for :meth:`Interceptor.workflow_interceptor_class`. There is no sandbox, so
    ``unsafe_extern_functions`` is Temporal's field and nothing reads it."""

    unsafe_extern_functions: MutableMapping[str, Callable[..., Any]] = field(default_factory=dict)


def _no_headers() -> dict[str, Payload]:
    return {}


def headers_from_wire(wire: Any) -> dict[str, Payload]:
    """An event's or task's ``header`` (name -> the server's JSON payload) as Temporal's mapping."""
    if not isinstance(wire, dict):
        return {}
    return {str(key): payload_from_wire(value) for key, value in wire.items()}


def headers_to_wire(headers: Mapping[str, Payload]) -> dict[str, Any]:
    return {key: payload_to_wire(value) for key, value in headers.items()}


def run_to_end(step: Coroutine[Any, Any, Any]) -> Any:
    """A query's answer from the inbound chain, which must not wait: a query runs to its end
    at once, outside any workflow task."""
    try:
        step.send(None)
    except StopIteration as done:
        return done.value
    step.close()
    raise RuntimeError("a query (or a query interceptor) waited; queries must answer at once")


@dataclass
class ExecuteActivityInput:
    """Input for :meth:`ActivityInboundInterceptor.execute_activity`."""

    fn: Callable[..., Any]
    args: Sequence[Any]
    executor: concurrent.futures.Executor | None
    headers: Mapping[str, Payload]


class ActivityInboundInterceptor:
    """Wraps an activity attempt; each method passes to ``next`` unless overridden."""

    def __init__(self, next: ActivityInboundInterceptor) -> None:
        self.next = next

    def init(self, outbound: ActivityOutboundInterceptor) -> None:
        """Called before ``execute_activity``; wrap ``outbound`` before passing it on to add one."""
        self.next.init(outbound)

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        return await self.next.execute_activity(input)


class ActivityOutboundInterceptor:
    """Wraps what an activity asks of the worker: ``activity.info()`` and ``activity.heartbeat()``."""

    def __init__(self, next: ActivityOutboundInterceptor) -> None:
        self.next = next

    def info(self) -> activity.Info:
        return self.next.info()

    def heartbeat(self, *details: Any) -> None:
        self.next.heartbeat(*details)


@dataclass
class ExecuteWorkflowInput:
    """Input for :meth:`WorkflowInboundInterceptor.execute_workflow`; ``run_fn`` is unbound."""

    type: type
    run_fn: Callable[..., Awaitable[Any]]
    args: Sequence[Any]
    headers: Mapping[str, Payload]


@dataclass
class HandleSignalInput:
    """Input for :meth:`WorkflowInboundInterceptor.handle_signal`."""

    signal: str
    args: Sequence[Any]
    headers: Mapping[str, Payload]


@dataclass
class HandleQueryInput:
    """Input for :meth:`WorkflowInboundInterceptor.handle_query`."""

    id: str
    query: str
    args: Sequence[Any]
    headers: Mapping[str, Payload]


@dataclass
class HandleUpdateInput:
    """Input for :meth:`WorkflowInboundInterceptor.handle_update_validator` and
    :meth:`WorkflowInboundInterceptor.handle_update_handler`."""

    id: str
    update: str
    args: Sequence[Any]
    headers: Mapping[str, Payload]


@dataclass
class StartActivityInput:
    """Input for :meth:`WorkflowOutboundInterceptor.start_activity`."""

    activity: str
    args: Sequence[Any]
    activity_id: str | None
    task_queue: str | None
    schedule_to_close_timeout: timedelta | None
    schedule_to_start_timeout: timedelta | None
    start_to_close_timeout: timedelta | None
    heartbeat_timeout: timedelta | None
    retry_policy: RetryPolicy | None
    cancellation_type: ActivityCancellationType
    headers: Mapping[str, Payload]
    disable_eager_execution: bool = False
    versioning_intent: Any = None
    summary: str | None = None
    priority: Any = None
    arg_types: list[type] | None = None
    ret_type: Any = None


@dataclass
class StartLocalActivityInput:
    """Input for :meth:`WorkflowOutboundInterceptor.start_local_activity`."""

    activity: str
    args: Sequence[Any]
    activity_id: str | None
    schedule_to_close_timeout: timedelta | None
    schedule_to_start_timeout: timedelta | None
    start_to_close_timeout: timedelta | None
    retry_policy: RetryPolicy | None
    local_retry_threshold: timedelta | None
    cancellation_type: ActivityCancellationType
    headers: Mapping[str, Payload]
    summary: str | None = None
    arg_types: list[type] | None = None
    ret_type: Any = None


@dataclass
class StartChildWorkflowInput:
    """Input for :meth:`WorkflowOutboundInterceptor.start_child_workflow`."""

    workflow: str
    args: Sequence[Any]
    id: str
    task_queue: str | None
    cancellation_type: ChildWorkflowCancellationType
    parent_close_policy: ParentClosePolicy
    execution_timeout: timedelta | None
    run_timeout: timedelta | None
    task_timeout: timedelta | None
    id_reuse_policy: WorkflowIDReusePolicy
    retry_policy: RetryPolicy | None
    cron_schedule: str
    memo: Mapping[str, Any] | None
    search_attributes: Mapping[str, Any] | None
    headers: Mapping[str, Payload]
    versioning_intent: Any = None
    static_summary: str | None = None
    static_details: str | None = None
    priority: Any = None
    arg_types: list[type] | None = None
    ret_type: Any = None


@dataclass
class SignalChildWorkflowInput:
    """Input for :meth:`WorkflowOutboundInterceptor.signal_child_workflow`."""

    signal: str
    args: Sequence[Any]
    child_workflow_id: str
    headers: Mapping[str, Payload] = field(default_factory=_no_headers)


@dataclass
class SignalExternalWorkflowInput:
    """Input for :meth:`WorkflowOutboundInterceptor.signal_external_workflow`."""

    signal: str
    args: Sequence[Any]
    namespace: str
    workflow_id: str
    workflow_run_id: str | None
    headers: Mapping[str, Payload] = field(default_factory=_no_headers)


@dataclass
class ContinueAsNewInput:
    """Input for :meth:`WorkflowOutboundInterceptor.continue_as_new`; unset options keep the
    current run's."""

    workflow: str | None
    args: Sequence[Any]
    task_queue: str | None
    run_timeout: timedelta | None
    task_timeout: timedelta | None
    backoff_start_interval: timedelta | None
    retry_policy: RetryPolicy | None
    memo: Mapping[str, Any] | None
    search_attributes: Mapping[str, Any] | None
    headers: Mapping[str, Payload]
    versioning_intent: Any = None
    arg_types: list[type] | None = None


class WorkflowInboundInterceptor:
    """Wraps what the engine asks of a workflow run: running it and its handlers."""

    def __init__(self, next: WorkflowInboundInterceptor) -> None:
        self.next = next

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        """Called once per run, before its code; wrap ``outbound`` before passing it on to add one."""
        self.next.init(outbound)

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        return await self.next.execute_workflow(input)

    async def handle_signal(self, input: HandleSignalInput) -> None:
        await self.next.handle_signal(input)

    async def handle_query(self, input: HandleQueryInput) -> Any:
        """A query's answer; it must not wait (a query runs to its end in one step)."""
        return await self.next.handle_query(input)

    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        self.next.handle_update_validator(input)

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        return await self.next.handle_update_handler(input)


class WorkflowOutboundInterceptor:
    """Wraps what a workflow run's code asks of the engine."""

    def __init__(self, next: WorkflowOutboundInterceptor) -> None:
        self.next = next

    def info(self) -> workflow.Info:
        return self.next.info()

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        self.next.continue_as_new(input)

    def start_activity(self, input: StartActivityInput) -> asyncio.Task[Any]:
        """The activity's handle: a task that resolves to its result."""
        return self.next.start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> asyncio.Future[Any]:
        return self.next.start_local_activity(input)

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> ChildWorkflowHandle:
        return await self.next.start_child_workflow(input)

    async def signal_child_workflow(self, input: SignalChildWorkflowInput) -> None:
        await self.next.signal_child_workflow(input)

    async def signal_external_workflow(self, input: SignalExternalWorkflowInput) -> None:
        await self.next.signal_external_workflow(input)
