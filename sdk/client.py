"""The client: start, signal, query, cancel, terminate, describe and await workflows."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import quote

from sdk._async_activity import AsyncActivityCancelledError as AsyncActivityCancelledError
from sdk._async_activity import AsyncActivityHandle
from sdk._build_ids import BuildIdOpAddNewDefault as BuildIdOpAddNewDefault
from sdk._build_ids import BuildIdVersionSet as BuildIdVersionSet
from sdk._build_ids import WorkerBuildIdVersionSets as WorkerBuildIdVersionSets
from sdk._client_impl import ClientOutbound
from sdk._client_interceptor import (
    CancelWorkflowInput,
    CountWorkflowsInput,
    DescribeWorkflowInput,
    FetchWorkflowHistoryEventsInput,
    Interceptor,
    OutboundInterceptor,
    QueryWorkflowInput,
    SignalWorkflowInput,
    StartWorkflowInput,
    StartWorkflowUpdateInput,
    StartWorkflowUpdateWithStartInput,
    TerminateWorkflowInput,
    UpdateWithStartStartWorkflowInput,
    UpdateWithStartUpdateWorkflowInput,
    build_chain,
)
from sdk._executions import (
    WorkflowExecutionCount,
    WorkflowExecutionCountAggregationGroup,
    WorkflowExecutionDescription,
)
from sdk._http import HttpTransport
from sdk._listing import PagedAsyncIterator
from sdk._listing import WorkflowExecutionAsyncIterator as WorkflowExecutionAsyncIterator
from sdk._local_closes import LocalCloses
from sdk._payload_refs import PayloadRefResolver
from sdk._runtime.replayer import WorkflowHistory
from sdk._update_with_start import UpdateWithStart
from sdk._updates import WithStartWorkflowOperation as WithStartWorkflowOperation
from sdk._updates import WorkflowUpdateHandle as WorkflowUpdateHandle
from sdk._updates import WorkflowUpdateStage as WorkflowUpdateStage
from sdk._workflow_handle import HISTORY_WAIT_SECONDS
from sdk._workflow_handle import WorkflowHandle as WorkflowHandle
from sdk.common import RetryPolicy, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from sdk.converter import DataConverter, default_converter, return_hint
from sdk.envconfig import base_url, resolve_connection
from sdk.exceptions import RPCError as RPCError
from sdk.exceptions import RPCTimeoutOrCancelledError as RPCTimeoutOrCancelledError
from sdk.exceptions import WorkflowContinuedAsNewError as WorkflowContinuedAsNewError
from sdk.exceptions import WorkflowFailureError as WorkflowFailureError
from sdk.exceptions import WorkflowQueryFailedError as WorkflowQueryFailedError
from sdk.exceptions import WorkflowUpdateFailedError as WorkflowUpdateFailedError
from sdk.exceptions import (
    WorkflowUpdateRPCTimeoutOrCancelledError as WorkflowUpdateRPCTimeoutOrCancelledError,
)
from sdk.schedule import (
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionResult,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleCalendarSpec,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleInfo,
    ScheduleIntervalSpec,
    ScheduleListDescription,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
    create_schedule,
    list_schedules,
)
from sdk.search_attributes import SearchAttributesInput
from sdk.workflow._definition import workflow_name


def default_identity() -> str:
    return f"{os.getpid()}@{socket.gethostname()}"


# Temporal's connect options with nothing to configure over HTTP.
TEMPORAL_CONNECT_OPTIONS = frozenset(
    {
        "default_workflow_query_reject_condition", "dns_load_balancing_config", "grpc_compression",
        "header_codec_behavior", "http_connect_proxy_config", "keep_alive_config",
        "lazy", "payload_limits", "plugins", "retry_config", "rpc_metadata", "runtime",
    }
)  # fmt: skip


class EagerWorkflowRunner(Protocol):
    """What a worker in this process offers an eager start: a free slot and a way to run the task."""

    async def reserve_slot(self) -> bool: ...

    def release_slot(self) -> None: ...

    def run_reserved(self, task: dict[str, Any]) -> None: ...


class Client(UpdateWithStart):
    """A connection to one namespace of a Chronicle server."""

    def __init__(
        self,
        transport: HttpTransport,
        *,
        data_converter: DataConverter,
        identity: str,
        interceptors: Sequence[Interceptor] = (),
    ) -> None:
        self.transport = transport
        self.data_converter = data_converter
        transport.payload_codec = data_converter.payload_codec
        self.identity = identity
        self.namespace = transport.namespace
        # Events name payloads past the server's inline limit by digest; this fetches them.
        self.payload_refs = PayloadRefResolver(transport)
        self._eager_runners: dict[str, list[EagerWorkflowRunner]] = {}
        # Closes of runs started eagerly here, seen by this process's worker.
        self.local_closes = LocalCloses()
        # Built once: every call goes to the outermost link (the root when none is given).
        self.interceptors = list(interceptors)
        self.outbound: OutboundInterceptor = build_chain(ClientOutbound(self), self.interceptors)

    def register_eager_runner(self, task_queue: str, runner: EagerWorkflowRunner) -> None:
        """Called by a running worker built on this client: it can take eager starts for its queue."""
        self._eager_runners.setdefault(task_queue, []).append(runner)

    def unregister_eager_runner(self, task_queue: str, runner: EagerWorkflowRunner) -> None:
        runners = self._eager_runners.get(task_queue, [])
        if runner in runners:
            runners.remove(runner)

    async def _reserve_eager_runner(self, task_queue: str) -> EagerWorkflowRunner | None:
        for runner in self._eager_runners.get(task_queue, []):
            if await runner.reserve_slot():
                return runner
        return None

    @classmethod
    async def connect(
        cls,
        target_host: str | None = None,
        *,
        namespace: str | None = None,
        api_key: str | None = None,
        data_converter: DataConverter | None = None,
        identity: str | None = None,
        tls: bool | Any = None,
        url: str | None = None,
        interceptors: Sequence[Interceptor] = (),
        **_temporal_options: Any,
    ) -> Client:
        """Connect to a Chronicle server: ``Client.connect(**ClientConfig.load_client_connect_config())``
        as in Temporal, or ``Client.connect("http://127.0.0.1:8000", namespace=..., api_key=...)``.

        What is not given comes from ``sdk.envconfig``'s chain: ``CHRONICLE_*`` (then
        ``TEMPORAL_*``) environment variables, a TOML profile, then ``.chronicle/dev.json``. A
        ``host:port`` address (Temporal's form) is reached over ``http``, or ``https`` with
        ``tls``. ``interceptors`` wrap the client's calls (``sdk.client.Interceptor``; those
        that are also ``sdk.worker.Interceptor`` wrap its workers' too). Temporal's gRPC
        options (``rpc_metadata``, ``lazy``, ``runtime``, ``plugins``, ...) are accepted and
        have nothing to configure here.
        """
        unknown = sorted(set(_temporal_options) - TEMPORAL_CONNECT_OPTIONS)
        if unknown:
            raise TypeError(f"Client.connect() got unexpected keyword argument(s): {', '.join(unknown)}")
        host, namespace, api_key = resolve_connection(target_host or url, namespace, api_key)
        transport = HttpTransport(base_url(host, tls=bool(tls)), namespace, api_key)
        return cls(
            transport,
            data_converter=data_converter or default_converter,
            identity=identity or default_identity(),
            interceptors=interceptors,
        )

    async def close(self) -> None:
        await self.transport.close()

    async def start_workflow(
        self,
        workflow: str | Callable[..., Any],
        arg: Any = None,
        *,
        args: Sequence[Any] = (),
        id: str,
        task_queue: str,
        result_type: Any = None,
        id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy: WorkflowIDConflictPolicy = WorkflowIDConflictPolicy.UNSPECIFIED,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        task_timeout: timedelta | None = None,
        memo: dict[str, Any] | None = None,
        search_attributes: SearchAttributesInput | None = None,
        request_id: str | None = None,
        retry_policy: RetryPolicy | None = None,
        start_delay: timedelta | None = None,
        cron_schedule: str = "",
        start_signal: str | None = None,
        start_signal_args: Sequence[Any] = (),
        request_eager_start: bool = False,
        _wait_for_close: float = 0.0,
    ) -> WorkflowHandle:
        """Start a workflow, or signal-with-start it given ``start_signal``.

        ``request_eager_start``: when a worker built on this client polls ``task_queue`` in
        this process and has a free slot, the server hands the first workflow task back in
        the start response and that worker runs it at once, skipping a dispatch through the
        task queue. Otherwise (or if the server declines) the start is an ordinary one.

        ``_wait_for_close`` (what ``execute_workflow`` sends): the server holds its answer up
        to that many seconds for the run's close, which the handle keeps for ``result()``.
        """
        values = list(args) if args else ([] if arg is None else [arg])
        if result_type is None and not isinstance(workflow, str):
            result_type = return_hint(workflow)
        return await self.outbound.start_workflow(
            StartWorkflowInput(
                workflow=workflow_name(workflow),
                args=values,
                id=id,
                task_queue=task_queue,
                execution_timeout=execution_timeout,
                run_timeout=run_timeout,
                task_timeout=task_timeout,
                id_reuse_policy=id_reuse_policy,
                id_conflict_policy=id_conflict_policy,
                retry_policy=retry_policy,
                cron_schedule=cron_schedule,
                memo=memo,
                search_attributes=search_attributes,
                start_delay=start_delay,
                headers={},
                start_signal=start_signal,
                start_signal_args=list(start_signal_args),
                static_summary=None,
                static_details=None,
                ret_type=result_type,
                rpc_metadata={},
                rpc_timeout=None,
                request_eager_start=request_eager_start,
                request_id=request_id,
                wait_for_close=_wait_for_close,
            )
        )

    async def execute_workflow(
        self, workflow: str | Callable[..., Any], arg: Any = None, **options: Any
    ) -> Any:
        """Start a workflow and wait for its result: one call when the run closes within the
        server's wait, since the start's answer then carries the close."""
        handle = await self.start_workflow(workflow, arg, _wait_for_close=HISTORY_WAIT_SECONDS, **options)
        return await handle.result()

    async def signal_with_start(
        self, workflow: str | Callable[..., Any], arg: Any = None, *, start_signal: str, **options: Any
    ) -> WorkflowHandle:
        return await self.start_workflow(workflow, arg, start_signal=start_signal, **options)

    async def update_worker_build_id_compatibility(
        self, task_queue: str, operation: BuildIdOpAddNewDefault
    ) -> None:
        """Set the task queue's default build (needs an admin key); new runs are pinned to it."""
        if not isinstance(operation, BuildIdOpAddNewDefault):
            raise TypeError("only BuildIdOpAddNewDefault is supported")
        await self.transport.post(
            f"/task-queues/{quote(task_queue, safe='')}/build-ids", {"build_id": operation.build_id}
        )

    async def get_worker_build_id_compatibility(self, task_queue: str) -> WorkerBuildIdVersionSets | None:
        """The queue's builds, oldest first, the default last; None when it is unversioned."""
        data = await self.transport.get(f"/task-queues/{quote(task_queue, safe='')}/build-ids") or {}
        return WorkerBuildIdVersionSets.from_wire(data)

    def get_workflow_handle(
        self,
        workflow_id: str,
        *,
        run_id: str | None = None,
        first_execution_run_id: str | None = None,
        result_type: Any = None,
    ) -> WorkflowHandle:
        """A handle on ``workflow_id`` (its latest run, or ``run_id``); ``first_execution_run_id``
        is accepted for Temporal's signature (the handle follows the run chain it is given)."""
        return WorkflowHandle(self, workflow_id, run_id=run_id, result_run_id=run_id, result_type=result_type)

    def get_workflow_handle_for(
        self,
        workflow: Callable[..., Any],
        workflow_id: str,
        *,
        run_id: str | None = None,
        first_execution_run_id: str | None = None,
    ) -> WorkflowHandle:
        """The typed form: ``get_workflow_handle_for(MyWorkflow.run, id)``, its result decoded as
        the run method declares."""
        return self.get_workflow_handle(workflow_id, run_id=run_id, result_type=return_hint(workflow))

    def list_workflows(
        self,
        query: str | None = None,
        *,
        limit: int | None = None,
        page_size: int = 1000,
        next_page_token: str | None = None,
    ) -> WorkflowExecutionAsyncIterator[WorkflowExecutionDescription]:
        """Executions matching a visibility query (Temporal's list filter), page by page; iterate
        it with ``async for`` (``.map_histories()`` gives each run's history).

        The server reads the query: ``WorkflowType = 'Order' AND Amount > 100 ORDER BY StartTime``.
        A query it cannot read raises ``RPCError`` with code ``invalid_query`` and the position.
        """
        size = min(page_size, limit) if limit else page_size
        pages = self._list_pages(query or "", max(1, size), next_page_token or "")
        return WorkflowExecutionAsyncIterator(pages, self._history_of, limit=limit)

    async def _list_pages(
        self, query: str, page_size: int, token: str
    ) -> AsyncIterator[WorkflowExecutionDescription]:
        while True:
            params = {"query": query, "page_size": page_size, "next_page_token": token or None}
            page = await self.transport.get("/workflows", params=params) or {}
            for row in page.get("executions", []):
                yield WorkflowExecutionDescription.from_wire(row)
            token = page.get("next_page_token") or ""
            if not token:
                return

    async def _history_of(self, execution: WorkflowExecutionDescription) -> WorkflowHistory:
        handle = self.get_workflow_handle(execution.workflow_id, run_id=execution.run_id)
        return await handle.fetch_history()

    async def create_schedule(
        self,
        id: str,
        schedule: Schedule,
        *,
        trigger_immediately: bool = False,
        backfill: Sequence[ScheduleBackfill] = (),
        memo: dict[str, Any] | None = None,
    ) -> ScheduleHandle:
        """Create a schedule on the server; it fires from now on by its spec."""
        return await create_schedule(
            self, id, schedule, trigger_immediately=trigger_immediately, backfill=backfill, memo=memo
        )

    def get_async_activity_handle(
        self,
        *,
        task_token: bytes | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
        activity_id: str | None = None,
    ) -> AsyncActivityHandle:
        """A handle to finish an activity that called ``activity.raise_complete_async()``: by the
        task token it was given (``activity.info().task_token``), or by ``workflow_id`` (and
        ``run_id``; the latest run without it) and ``activity_id``."""
        return AsyncActivityHandle(
            self,
            self.identity,
            task_token=task_token,
            workflow_id=workflow_id,
            run_id=run_id,
            activity_id=activity_id,
        )

    def get_schedule_handle(self, id: str) -> ScheduleHandle:
        return ScheduleHandle(self, id)

    def list_schedules(
        self, query: str | None = None, *, page_size: int = 1000
    ) -> PagedAsyncIterator[ScheduleListDescription]:
        """Every schedule of the namespace, in id order; iterate it, or await it first as
        Temporal's samples do. ``query`` is accepted for Temporal's signature and not applied."""
        return PagedAsyncIterator(list_schedules(self, page_size=page_size))

    async def count_workflows(self, query: str = "") -> WorkflowExecutionCount:
        """How many executions match ``query``; end it with ``GROUP BY ExecutionStatus`` for groups."""
        return await self.outbound.count_workflows(CountWorkflowsInput(query))


__all__ = [
    "AsyncActivityCancelledError",
    "AsyncActivityHandle",
    "BuildIdOpAddNewDefault",
    "BuildIdVersionSet",
    "CancelWorkflowInput",
    "Client",
    "CountWorkflowsInput",
    "DescribeWorkflowInput",
    "FetchWorkflowHistoryEventsInput",
    "Interceptor",
    "OutboundInterceptor",
    "QueryWorkflowInput",
    "RPCError",
    "RPCTimeoutOrCancelledError",
    "Schedule",
    "ScheduleActionExecutionStartWorkflow",
    "ScheduleActionResult",
    "ScheduleActionStartWorkflow",
    "ScheduleBackfill",
    "ScheduleCalendarSpec",
    "ScheduleDescription",
    "ScheduleHandle",
    "ScheduleInfo",
    "ScheduleIntervalSpec",
    "ScheduleListDescription",
    "ScheduleOverlapPolicy",
    "SchedulePolicy",
    "ScheduleRange",
    "ScheduleSpec",
    "ScheduleState",
    "ScheduleUpdate",
    "ScheduleUpdateInput",
    "SignalWorkflowInput",
    "StartWorkflowInput",
    "StartWorkflowUpdateInput",
    "StartWorkflowUpdateWithStartInput",
    "TerminateWorkflowInput",
    "UpdateWithStartStartWorkflowInput",
    "UpdateWithStartUpdateWorkflowInput",
    "WithStartWorkflowOperation",
    "WorkerBuildIdVersionSets",
    "WorkflowContinuedAsNewError",
    "WorkflowExecutionAsyncIterator",
    "WorkflowExecutionCount",
    "WorkflowExecutionCountAggregationGroup",
    "WorkflowExecutionDescription",
    "WorkflowFailureError",
    "WorkflowHandle",
    "WorkflowQueryFailedError",
    "WorkflowUpdateFailedError",
    "WorkflowUpdateHandle",
    "WorkflowUpdateRPCTimeoutOrCancelledError",
    "WorkflowUpdateStage",
]
