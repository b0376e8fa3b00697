"""Client interceptors (Temporal's ``temporalio.client.Interceptor`` API; ``sdk.client``
re-exports the names).

``Client.connect(..., interceptors=[a, b])`` builds one chain when the client is made:
``a.intercept_client(b.intercept_client(root))``, so ``a`` sees each call first. Every client
call that reaches the server (start, signal, query, update, cancel, terminate, describe,
history, count) builds its ``*Input`` and calls the outermost link once; with no interceptor
the outermost link is the root, which makes the HTTP call, so an unintercepted client pays
for one dataclass and nothing else.

``headers`` are Temporal's per-call header payloads. The server carries them on workflow
updates (the worker's ``HandleUpdateInput.headers``); it has no header on a start, signal or
query request yet, so what an interceptor puts there is not sent. ``rpc_metadata``,
``rpc_timeout``, ``static_summary``, ``static_details``, ``priority`` and
``versioning_override`` are Temporal's fields and are carried along unused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sdk.api.common.v1 import Payload
from sdk.common import RetryPolicy, WorkflowIDConflictPolicy, WorkflowIDReusePolicy

if TYPE_CHECKING:
    from sdk._executions import WorkflowExecutionCount, WorkflowExecutionDescription
    from sdk._updates import WithStartWorkflowOperation, WorkflowUpdateHandle, WorkflowUpdateStage
    from sdk._workflow_handle import WorkflowHandle
    from sdk.api.history.v1 import HistoryEvent
    from sdk.search_attributes import SearchAttributesInput


def _no_headers() -> dict[str, Payload]:
    return {}


@dataclass
class StartWorkflowInput:
    """Input for :meth:`OutboundInterceptor.start_workflow` (a start, or a signal-with-start
    when ``start_signal`` is set)."""

    workflow: str
    args: Sequence[Any]
    id: str
    task_queue: str
    execution_timeout: timedelta | None
    run_timeout: timedelta | None
    task_timeout: timedelta | None
    id_reuse_policy: WorkflowIDReusePolicy
    id_conflict_policy: WorkflowIDConflictPolicy
    retry_policy: RetryPolicy | None
    cron_schedule: str
    memo: Mapping[str, Any] | None
    search_attributes: SearchAttributesInput | None
    start_delay: timedelta | None
    headers: Mapping[str, Payload]
    start_signal: str | None
    start_signal_args: Sequence[Any]
    static_summary: str | None
    static_details: str | None
    ret_type: Any
    rpc_metadata: Mapping[str, str | bytes]
    rpc_timeout: timedelta | None
    request_eager_start: bool
    priority: Any = None
    versioning_override: Any = None
    # Chronicle's: the start's request id (retries of one start), and how long the server
    # should hold its answer for the run's close (what ``execute_workflow`` asks).
    request_id: str | None = None
    wait_for_close: float = 0.0


@dataclass
class SignalWorkflowInput:
    """Input for :meth:`OutboundInterceptor.signal_workflow`."""

    id: str
    run_id: str | None
    signal: str
    args: Sequence[Any]
    headers: Mapping[str, Payload] = field(default_factory=_no_headers)
    rpc_metadata: Mapping[str, str | bytes] = field(default_factory=dict)
    rpc_timeout: timedelta | None = None


@dataclass
class QueryWorkflowInput:
    """Input for :meth:`OutboundInterceptor.query_workflow`."""

    id: str
    run_id: str | None
    query: str
    args: Sequence[Any]
    reject_condition: Any = None
    headers: Mapping[str, Payload] = field(default_factory=_no_headers)
    ret_type: Any = None
    rpc_metadata: Mapping[str, str | bytes] = field(default_factory=dict)
    rpc_timeout: timedelta | None = None


@dataclass
class CancelWorkflowInput:
    """Input for :meth:`OutboundInterceptor.cancel_workflow`."""

    id: str
    run_id: str | None
    first_execution_run_id: str | None
    reason: str
    rpc_metadata: Mapping[str, str | bytes] = field(default_factory=dict)
    rpc_timeout: timedelta | None = None


@dataclass
class TerminateWorkflowInput:
    """Input for :meth:`OutboundInterceptor.terminate_workflow`."""

    id: str
    run_id: str | None
    first_execution_run_id: str | None
    args: Sequence[Any]
    reason: str | None
    rpc_metadata: Mapping[str, str | bytes] = field(default_factory=dict)
    rpc_timeout: timedelta | None = None


@dataclass
class DescribeWorkflowInput:
    """Input for :meth:`OutboundInterceptor.describe_workflow`."""

    id: str
    run_id: str | None
    rpc_metadata: Mapping[str, str | bytes] = field(default_factory=dict)
    rpc_timeout: timedelta | None = None


@dataclass
class FetchWorkflowHistoryEventsInput:
    """Input for :meth:`OutboundInterceptor.fetch_workflow_history_events`."""

    id: str
    run_id: str | None
    page_size: int | None
    next_page_token: bytes | None
    wait_new_event: bool
    event_filter_type: Any = None
    skip_archival: bool = False
    rpc_metadata: Mapping[str, str | bytes] = field(default_factory=dict)
    rpc_timeout: timedelta | None = None


@dataclass
class CountWorkflowsInput:
    """Input for :meth:`OutboundInterceptor.count_workflows`."""

    query: str | None
    rpc_metadata: Mapping[str, str | bytes] = field(default_factory=dict)
    rpc_timeout: timedelta | None = None


@dataclass
class StartWorkflowUpdateInput:
    """Input for :meth:`OutboundInterceptor.start_workflow_update`."""

    id: str
    run_id: str | None
    first_execution_run_id: str | None
    update_id: str | None
    update: str
    args: Sequence[Any]
    wait_for_stage: WorkflowUpdateStage
    headers: Mapping[str, Payload]
    ret_type: Any
    rpc_metadata: Mapping[str, str | bytes] = field(default_factory=dict)
    rpc_timeout: timedelta | None = None


@dataclass
class UpdateWithStartUpdateWorkflowInput:
    """The update half of :meth:`OutboundInterceptor.start_update_with_start_workflow`."""

    update_id: str | None
    update: str
    args: Sequence[Any]
    wait_for_stage: WorkflowUpdateStage
    headers: Mapping[str, Payload]
    ret_type: Any


@dataclass
class UpdateWithStartStartWorkflowInput:
    """The start half of :meth:`OutboundInterceptor.start_update_with_start_workflow`: a
    start's options without signal-with-start and eager start."""

    workflow: str
    args: Sequence[Any]
    id: str
    task_queue: str
    execution_timeout: timedelta | None
    run_timeout: timedelta | None
    task_timeout: timedelta | None
    id_reuse_policy: WorkflowIDReusePolicy
    id_conflict_policy: WorkflowIDConflictPolicy
    retry_policy: RetryPolicy | None
    cron_schedule: str
    memo: Mapping[str, Any] | None
    search_attributes: SearchAttributesInput | None
    start_delay: timedelta | None
    headers: Mapping[str, Payload]
    static_summary: str | None
    static_details: str | None
    ret_type: Any
    priority: Any = None
    versioning_override: Any = None
    request_id: str | None = None


@dataclass
class StartWorkflowUpdateWithStartInput:
    """Input for :meth:`OutboundInterceptor.start_update_with_start_workflow`."""

    start_workflow_input: UpdateWithStartStartWorkflowInput
    update_workflow_input: UpdateWithStartUpdateWorkflowInput
    rpc_metadata: Mapping[str, str | bytes]
    rpc_timeout: timedelta | None
    # The operation whose ``workflow_handle()`` the call resolves.
    _operation: WithStartWorkflowOperation | None = None


class Interceptor:
    """A client interceptor: override :meth:`intercept_client` to wrap the client's calls.

    An interceptor that also subclasses ``sdk.worker.Interceptor`` is used by every worker
    made from the client as well (Temporal's rule)."""

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        """Return the link that takes the client's calls before ``next`` (``next`` itself
        to intercept nothing)."""
        return next


class OutboundInterceptor:
    """One link of the client's chain; each method passes its input to ``next`` unless
    overridden. Subclass it and override the calls to observe or change."""

    def __init__(self, next: OutboundInterceptor) -> None:
        self.next = next

    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle:
        return await self.next.start_workflow(input)

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        await self.next.signal_workflow(input)

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        return await self.next.query_workflow(input)

    async def cancel_workflow(self, input: CancelWorkflowInput) -> None:
        await self.next.cancel_workflow(input)

    async def terminate_workflow(self, input: TerminateWorkflowInput) -> None:
        await self.next.terminate_workflow(input)

    async def describe_workflow(self, input: DescribeWorkflowInput) -> WorkflowExecutionDescription:
        return await self.next.describe_workflow(input)

    def fetch_workflow_history_events(
        self, input: FetchWorkflowHistoryEventsInput
    ) -> AsyncIterator[HistoryEvent]:
        return self.next.fetch_workflow_history_events(input)

    async def count_workflows(self, input: CountWorkflowsInput) -> WorkflowExecutionCount:
        return await self.next.count_workflows(input)

    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle:
        return await self.next.start_workflow_update(input)

    async def start_update_with_start_workflow(
        self, input: StartWorkflowUpdateWithStartInput
    ) -> WorkflowUpdateHandle:
        return await self.next.start_update_with_start_workflow(input)


def build_chain(root: OutboundInterceptor, interceptors: Sequence[Interceptor]) -> OutboundInterceptor:
    """The outermost link: the first interceptor sees each call first."""
    chain = root
    for interceptor in reversed(list(interceptors)):
        chain = interceptor.intercept_client(chain)
    return chain
