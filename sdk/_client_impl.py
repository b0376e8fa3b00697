"""The root of the client's interceptor chain: each ``*Input`` becomes the server's HTTP call.

``Client`` and ``WorkflowHandle`` turn their Temporal-shaped arguments into inputs; this is
where an input, as the interceptors left it, is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sdk._client_interceptor import (
    CancelWorkflowInput,
    CountWorkflowsInput,
    DescribeWorkflowInput,
    FetchWorkflowHistoryEventsInput,
    OutboundInterceptor,
    QueryWorkflowInput,
    SignalWorkflowInput,
    StartWorkflowInput,
    StartWorkflowUpdateInput,
    StartWorkflowUpdateWithStartInput,
    TerminateWorkflowInput,
    UpdateWithStartStartWorkflowInput,
    UpdateWithStartUpdateWorkflowInput,
)
from sdk._executions import (
    WorkflowExecutionCount,
    WorkflowExecutionCountAggregationGroup,
    WorkflowExecutionDescription,
)
from sdk._http import AlreadyStartedRPCError
from sdk._updates import POLL_WAIT_SECONDS, WorkflowUpdateHandle, finish_update, update_body
from sdk._workflow_handle import CLOSE_EVENTS, HISTORY_PAGE_SIZE, HISTORY_WAIT_SECONDS, WorkflowHandle
from sdk.api.history.v1 import HistoryEvent
from sdk.converter import payload_to_wire
from sdk.exceptions import WorkflowAlreadyStartedError
from sdk.search_attributes import search_attributes_to_wire

if TYPE_CHECKING:
    from sdk.client import Client


def workflow_path(workflow_id: str, run_id: str | None, suffix: str = "") -> str:
    path = f"/workflows/{quote(workflow_id, safe='')}"
    return path + (f"/runs/{run_id}" if run_id else "") + suffix


class ClientOutbound(OutboundInterceptor):
    """The innermost link: it has no ``next``; it makes the calls."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def start_body(self, input: StartWorkflowInput | UpdateWithStartStartWorkflowInput) -> dict[str, Any]:
        """A start's request body (also the start half of update-with-start)."""
        converter = self.client.data_converter
        body: dict[str, Any] = {
            "workflow_id": input.id,
            "workflow_type": input.workflow,
            "task_queue": input.task_queue,
            "input": converter.to_payloads(list(input.args)),
            "request_id": input.request_id or str(uuid.uuid4()),
            "id_reuse_policy": input.id_reuse_policy.value,
            "id_conflict_policy": input.id_conflict_policy.value,
            "memo": {k: converter.to_payload(v) for k, v in (input.memo or {}).items()},
            "search_attributes": search_attributes_to_wire(input.search_attributes),
            "identity": self.client.identity,
        }
        for key, value in (
            ("execution_timeout", input.execution_timeout),
            ("run_timeout", input.run_timeout),
            ("task_timeout", input.task_timeout),
            ("start_delay", input.start_delay),
        ):
            if value is not None:
                body[key] = value.total_seconds()
        if input.retry_policy is not None:
            body["retry_policy"] = input.retry_policy.to_wire()
        if input.cron_schedule:
            body["cron_schedule"] = input.cron_schedule
        return body

    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle:
        client = self.client
        body = self.start_body(input)
        path = "/workflows"
        if input.start_signal is not None:
            path = "/signal-with-start"
            body["signal_name"] = input.start_signal
            body["signal_input"] = client.data_converter.to_payloads(list(input.start_signal_args))
        eager = None
        if input.request_eager_start and input.start_signal is None:
            eager = await client._reserve_eager_runner(input.task_queue)
            body["request_eager_execution"] = eager is not None
        options: dict[str, Any] = {}
        if input.wait_for_close > 0 and eager is None:
            # (A run started eagerly here closes in this process: its result needs no call.)
            body["wait_for_close"] = input.wait_for_close
            options["timeout"] = input.wait_for_close + 30
        try:
            answer = await client.transport.post(path, body, **options) or {}
        except BaseException as exc:
            if eager is not None:
                eager.release_slot()
            if isinstance(exc, AlreadyStartedRPCError):
                details = exc.details if isinstance(exc.details, dict) else {}
                raise WorkflowAlreadyStartedError(
                    input.id, input.workflow, run_id=details.get("run_id")
                ) from exc
            raise
        if eager is not None:
            task = answer.get("eager_workflow_task")
            if task:
                client.local_closes.expect(str(answer.get("run_id")))
                eager.run_reserved(task)
            else:
                eager.release_slot()
        return WorkflowHandle(
            client,
            input.id,
            run_id=answer.get("run_id"),
            result_run_id=answer.get("run_id"),
            result_type=input.ret_type,
            close_page=answer.get("close"),
        )

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        await self.client.transport.post(
            workflow_path(input.id, input.run_id, "/signal"),
            {
                "signal_name": input.signal,
                "input": self.client.data_converter.to_payloads(list(input.args)),
                "request_id": str(uuid.uuid4()),
                "identity": self.client.identity,
            },
        )

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        converter = self.client.data_converter
        answer = (
            await self.client.transport.post(
                workflow_path(input.id, input.run_id, "/query"),
                {"query_type": input.query, "query_args": converter.to_payloads(list(input.args))},
                timeout=60,
            )
            or {}
        )
        result = answer.get("answer")
        if isinstance(result, list):
            return converter.from_result(result, input.ret_type)
        return converter.from_payload(result, input.ret_type)

    async def cancel_workflow(self, input: CancelWorkflowInput) -> None:
        await self.client.transport.post(
            workflow_path(input.id, input.run_id, "/cancel"),
            {"reason": input.reason, "identity": self.client.identity},
        )

    async def terminate_workflow(self, input: TerminateWorkflowInput) -> None:
        body: dict[str, Any] = {"reason": input.reason or "", "identity": self.client.identity}
        if input.args:
            body["details"] = self.client.data_converter.to_payloads(list(input.args))
        await self.client.transport.post(workflow_path(input.id, input.run_id, "/terminate"), body)

    async def describe_workflow(self, input: DescribeWorkflowInput) -> WorkflowExecutionDescription:
        data = await self.client.transport.get(workflow_path(input.id, input.run_id)) or {}
        return WorkflowExecutionDescription.from_wire(data)

    async def fetch_workflow_history_events(  # an async generator: calling it starts nothing
        self, input: FetchWorkflowHistoryEventsInput
    ) -> AsyncIterator[HistoryEvent]:
        after, closed = 0, False
        path = workflow_path(input.id, input.run_id, "/history")
        while True:
            params: dict[str, Any] = {
                "after_event_id": after,
                "page_size": input.page_size or HISTORY_PAGE_SIZE,
            }
            if input.wait_new_event:
                params.update(wait_new_event=True, timeout=HISTORY_WAIT_SECONDS)
            page = (
                await self.client.transport.get(path, params=params, timeout=HISTORY_WAIT_SECONDS + 30) or {}
            )
            for event in await self.client.payload_refs.resolve(page.get("events") or []):
                after, closed = int(event["event_id"]), event["event_type"] in CLOSE_EVENTS
                yield HistoryEvent(event)
            cursor = page.get("next_after_event_id")
            if cursor:
                after = int(cursor)
            elif closed or not input.wait_new_event:
                return

    async def count_workflows(self, input: CountWorkflowsInput) -> WorkflowExecutionCount:
        data = await self.client.transport.get("/workflow-count", params={"query": input.query or ""}) or {}
        groups = [
            WorkflowExecutionCountAggregationGroup(
                count=int(g["count"]), group_values=list(g["group_values"])
            )
            for g in data.get("groups") or []
        ]
        return WorkflowExecutionCount(count=int(data.get("count") or 0), groups=groups)

    def _update_body(
        self, input: StartWorkflowUpdateInput | UpdateWithStartUpdateWorkflowInput
    ) -> dict[str, Any]:
        body = update_body(self.client, input.update, list(input.args), input.update_id, input.wait_for_stage)
        if input.headers:
            body["header"] = {key: payload_to_wire(value) for key, value in input.headers.items()}
        return body

    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle:
        body = self._update_body(input)
        if input.first_execution_run_id:
            body["first_execution_run_id"] = input.first_execution_run_id
        path = workflow_path(input.id, input.run_id, "/update")
        status = await self.client.transport.post(path, body, timeout=POLL_WAIT_SECONDS + 30) or {}
        return await finish_update(
            self.client, input.id, status, input.wait_for_stage, input.ret_type, input.rpc_timeout
        )

    async def start_update_with_start_workflow(
        self, input: StartWorkflowUpdateWithStartInput
    ) -> WorkflowUpdateHandle:
        """One call: start the workflow (or use the running one) and send it the update; the
        operation's ``workflow_handle()`` resolves (or raises) with the call."""
        start, update = input.start_workflow_input, input.update_workflow_input
        operation = input._operation
        future = operation._future() if operation is not None else None
        try:
            body = {"start": self.start_body(start), "update": self._update_body(update)}
            answer = (
                await self.client.transport.post("/update-with-start", body, timeout=POLL_WAIT_SECONDS + 30)
                or {}
            )
        except BaseException as exc:
            if future is not None and not future.done():
                future.set_exception(exc)
            raise
        if future is not None and not future.done():
            run_id = str(answer.get("run_id"))
            future.set_result(
                WorkflowHandle(
                    self.client, start.id, run_id=run_id, result_run_id=run_id, result_type=start.ret_type
                )
            )
        status = answer.get("update") or {}
        return await finish_update(
            self.client, start.id, status, update.wait_for_stage, update.ret_type, input.rpc_timeout
        )
