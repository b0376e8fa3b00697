"""A handle on one workflow execution: await its result, signal, query, update, cancel,
terminate, reset, describe it and read its history (``sdk.client`` re-exports it).

It reaches the server through the client that made it, typed here as the small protocol it
uses, so this module need not import the client that imports it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import quote

from sdk._client_interceptor import (
    CancelWorkflowInput,
    DescribeWorkflowInput,
    FetchWorkflowHistoryEventsInput,
    OutboundInterceptor,
    QueryWorkflowInput,
    SignalWorkflowInput,
    TerminateWorkflowInput,
)
from sdk._executions import WorkflowExecutionDescription
from sdk._failure import failure_to_exception
from sdk._http import HttpTransport
from sdk._local_closes import LocalCloses
from sdk._payload_refs import PayloadRefResolver
from sdk._runtime.replayer import WorkflowHistory
from sdk._updates import NO_ARG as NO_ARG
from sdk._updates import WorkflowUpdateHandle, WorkflowUpdateStage, start_update
from sdk.api.history.v1 import HistoryEvent
from sdk.converter import DataConverter, return_hint
from sdk.exceptions import CancelledError, TerminatedError, TimeoutError, WorkflowFailureError

CLOSE_EVENTS = {
    "WorkflowExecutionCompleted",
    "WorkflowExecutionFailed",
    "WorkflowExecutionTimedOut",
    "WorkflowExecutionCanceled",
    "WorkflowExecutionTerminated",
    "WorkflowExecutionContinuedAsNew",
}
HISTORY_WAIT_SECONDS = 30.0
HISTORY_PAGE_SIZE = 256


class HandleClient(Protocol):
    """What a handle needs of the client that made it."""

    @property
    def transport(self) -> HttpTransport: ...

    @property
    def data_converter(self) -> DataConverter: ...

    @property
    def identity(self) -> str: ...

    @property
    def payload_refs(self) -> PayloadRefResolver: ...

    @property
    def local_closes(self) -> LocalCloses: ...

    @property
    def outbound(self) -> OutboundInterceptor: ...


class WorkflowHandle:
    """A handle on one workflow id (and optionally one run)."""

    def __init__(
        self,
        client: HandleClient,
        workflow_id: str,
        *,
        run_id: str | None,
        result_run_id: str | None,
        result_type: Any = None,
        close_page: dict[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.id = workflow_id
        self.run_id = run_id
        self.result_run_id = result_run_id
        self.result_type = result_type
        # The run's close, when its start waited for it (the history read's close page).
        self._close_page_at_start = close_page

    def _path(self, suffix: str = "", run_id: str | None = None) -> str:
        path = f"/workflows/{quote(self.id, safe='')}"
        run = run_id if run_id is not None else self.run_id
        if run:
            path += f"/runs/{run}"
        return path + suffix

    async def result(self, *, follow_runs: bool = True) -> Any:
        """Wait for the run to close and return its result; follows continue-as-new and retries.

        A handle whose start waited for the close (``execute_workflow``) starts from the
        close it got: no further call unless the run carried on as another.
        """
        run_id = self.result_run_id
        local = await self.client.local_closes.wait(run_id)
        if local is not None:
            if not (follow_runs and local.get("new_run_id")):
                [event] = await self.client.payload_refs.resolve([local["event"]])
                return self._close_outcome(event)
            run_id = local["new_run_id"]
        after = 0
        page = self._close_page_at_start
        while True:
            if page is None:
                page = await self._close_page(run_id, after)
            run_id = run_id or page.get("run_id")
            events = await self.client.payload_refs.resolve(page.get("events") or [])
            new_run_id = page.get("new_run_id")
            page = None
            for event in events:
                after = max(after, int(event["event_id"]))
                if event["event_type"] not in CLOSE_EVENTS:
                    continue
                if follow_runs and new_run_id:
                    run_id, after = new_run_id, 0
                    break
                return self._close_outcome(event)

    async def _close_page(self, run_id: str | None, after: int) -> dict[str, Any]:
        """Wait for the run's close (a long-poll of its close event)."""
        page = await self.client.transport.get(
            self._path("/history", run_id),
            params={
                "after_event_id": after,
                "wait_new_event": True,
                "timeout": HISTORY_WAIT_SECONDS,
                # One answer when the run closes, not one per event it appends.
                "history_event_filter_type": "CLOSE_EVENT",
            },
            timeout=HISTORY_WAIT_SECONDS + 30,
        )
        return page or {}

    def _close_outcome(self, event: dict[str, Any]) -> Any:
        kind, attrs = event["event_type"], event.get("attributes") or {}
        converter = self.client.data_converter
        if kind == "WorkflowExecutionCompleted":
            return converter.from_result(attrs.get("result"), self.result_type)
        cause: BaseException
        if kind == "WorkflowExecutionFailed":
            cause = failure_to_exception(attrs.get("failure"), converter)
        elif kind == "WorkflowExecutionCanceled":
            cause = CancelledError("Workflow cancelled", *converter.from_payloads(attrs.get("details")))
        elif kind == "WorkflowExecutionTerminated":
            cause = TerminatedError(str(attrs.get("reason") or "Workflow terminated"))
        elif kind == "WorkflowExecutionTimedOut":
            cause = TimeoutError("Workflow timed out", type=None)
        else:
            cause = TerminatedError("Workflow continued as new")
        raise WorkflowFailureError(cause=cause)

    async def signal(
        self, signal: str | Callable[..., Any], arg: Any = NO_ARG, *, args: Sequence[Any] = ()
    ) -> None:
        name = (
            signal
            if isinstance(signal, str)
            else getattr(signal, "__chronicle_workflow_signal__", signal.__name__)
        )
        values = list(args) if args else ([] if arg is NO_ARG else [arg])
        await self.client.outbound.signal_workflow(SignalWorkflowInput(self.id, self.run_id, name, values))

    async def query(
        self,
        query: str | Callable[..., Any],
        arg: Any = NO_ARG,
        *,
        args: Sequence[Any] = (),
        result_type: Any = None,
    ) -> Any:
        name = (
            query
            if isinstance(query, str)
            else getattr(query, "__chronicle_workflow_query__", query.__name__)
        )
        if result_type is None and not isinstance(query, str):
            result_type = return_hint(query)
        values = list(args) if args else ([] if arg is NO_ARG else [arg])
        return await self.client.outbound.query_workflow(
            QueryWorkflowInput(self.id, self.run_id, name, values, ret_type=result_type)
        )

    async def start_update(
        self,
        update: str | Callable[..., Any],
        arg: Any = NO_ARG,
        *,
        wait_for_stage: WorkflowUpdateStage,
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: Any = None,
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowUpdateHandle:
        """Send an update and wait until it is ACCEPTED (or COMPLETED); ``id`` (default a new
        UUID) is applied once however often it is sent. ``await handle.result()`` for its value."""
        return await start_update(
            self,
            update,
            arg,
            wait_for_stage=wait_for_stage,
            args=args,
            id=id,
            result_type=result_type,
            rpc_timeout=rpc_timeout,
        )

    async def execute_update(
        self,
        update: str | Callable[..., Any],
        arg: Any = NO_ARG,
        *,
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: Any = None,
        rpc_timeout: timedelta | None = None,
    ) -> Any:
        """Send an update and return its handler's value; ``WorkflowUpdateFailedError`` if its
        validator rejected it or its handler failed."""
        handle = await self.start_update(
            update,
            arg,
            wait_for_stage=WorkflowUpdateStage.COMPLETED,
            args=args,
            id=id,
            result_type=result_type,
            rpc_timeout=rpc_timeout,
        )
        return await handle.result()

    def get_update_handle(
        self, id: str, *, workflow_run_id: str | None = None, result_type: Any = None
    ) -> WorkflowUpdateHandle:
        """A handle on an update sent before (by its id), to await its result."""
        run_id = workflow_run_id if workflow_run_id is not None else self.run_id
        return WorkflowUpdateHandle(self.client, id, self.id, workflow_run_id=run_id, result_type=result_type)

    def get_update_handle_for(
        self, update: Callable[..., Any], id: str, *, workflow_run_id: str | None = None
    ) -> WorkflowUpdateHandle:
        """``get_update_handle`` with the result type read from the update handler's hint."""
        return self.get_update_handle(id, workflow_run_id=workflow_run_id, result_type=return_hint(update))

    async def cancel(self, reason: str = "") -> None:
        await self.client.outbound.cancel_workflow(CancelWorkflowInput(self.id, self.run_id, None, reason))

    async def terminate(self, reason: str = "", *details: Any) -> None:
        await self.client.outbound.terminate_workflow(
            TerminateWorkflowInput(self.id, self.run_id, None, list(details), reason)
        )

    async def reset(
        self,
        event_id: int | None = None,
        *,
        reset_type: str | None = None,
        reason: str,
        reapply_signals: bool = True,
        reapply_updates: bool = True,
    ) -> str:
        """Reset to a workflow task and return the new run's id.

        Give ``event_id`` (a ``WorkflowTaskCompleted`` event of this run) or ``reset_type``
        ``"FirstWorkflowTask"`` / ``"LastWorkflowTask"``. The open run, if any, is
        terminated with ``reason``; signals and updates that came after the point are sent
        again unless ``reapply_signals`` or ``reapply_updates`` is false. Safe to retry: one
        request id per call.
        """
        if (event_id is None) == (reset_type is None):
            raise ValueError("give exactly one of event_id and reset_type")
        body: dict[str, Any] = {
            "reason": reason,
            "reapply_signals": reapply_signals,
            "reset_reapply_exclude_types": [] if reapply_updates else ["RESET_REAPPLY_EXCLUDE_TYPE_UPDATE"],
            "request_id": str(uuid.uuid4()),
            "identity": self.client.identity,
        }
        if event_id is not None:
            body["event_id"] = event_id
        else:
            body["reset_type"] = reset_type
        answer = await self.client.transport.post(self._path("/reset"), body) or {}
        return str(answer["run_id"])

    async def describe(self) -> WorkflowExecutionDescription:
        return await self.client.outbound.describe_workflow(DescribeWorkflowInput(self.id, self.run_id))

    async def fetch_history(self) -> WorkflowHistory:
        """The whole run history as typed events, ready for ``Replayer`` or ``to_json``."""
        events = [event async for event in self.fetch_history_events()]
        return WorkflowHistory(workflow_id=self.id, events=events, run_id=self.run_id or "")

    def fetch_history_events(
        self, *, page_size: int | None = None, wait_new_event: bool = False
    ) -> AsyncIterator[HistoryEvent]:
        """Every event of the run, page by page, as ``HistoryEvent``s: Temporal's typed
        event (``event.event_type``, ``event.event_id``, ``event.event_time``) that is also
        the server's JSON dict (``event["event_type"] == "TimerFired"``).

        With ``wait_new_event`` the iteration does not stop at the last event of an open run:
        it waits for the next ones (a long-poll each time) until the run's close event.
        """
        return self.client.outbound.fetch_workflow_history_events(
            FetchWorkflowHistoryEventsInput(self.id, self.run_id, page_size, None, wait_new_event)
        )
