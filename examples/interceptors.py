"""Interceptors: see, change and carry context through every call, without touching the
workflow or activity code.

One ``TracingInterceptor`` is both a client interceptor and a worker interceptor, so giving it
to ``Client.connect`` is enough: the worker made from that client uses it too (Temporal's rule).
It logs the client's calls (start, signal, query, update); inside the workflow it logs the run,
its signals and the activities it starts, and stamps a ``trace-id`` header on each activity;
around each activity attempt it reads that header back and tags the result. A workflow
interceptor is workflow code: it runs again when the run is replayed, so it logs only when
``workflow.unsafe.is_replaying()`` is false. Run it against ``make run``:
``python -m examples.interceptors``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from sdk import activity, workflow
from sdk.client import (
    Client,
    OutboundInterceptor,
    QueryWorkflowInput,
    SignalWorkflowInput,
    StartWorkflowInput,
    StartWorkflowUpdateInput,
    WorkflowHandle,
    WorkflowUpdateHandle,
)
from sdk.client import Interceptor as ClientInterceptor
from sdk.envconfig import ClientConfig
from sdk.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    HandleSignalInput,
    Interceptor,
    StartActivityInput,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

TRACE_HEADER = "trace-id"
# What the workflow interceptor saw (live, not replayed); the workflow runs in this process.
WORKFLOW_TRACE: list[str] = []


@activity.defn
async def pack(item: str) -> str:
    return f"{item} packed"


@workflow.defn
class Parcel:
    def __init__(self) -> None:
        self.labels: list[str] = []
        self.sealed = False

    @workflow.run
    async def run(self, item: str) -> str:
        packed = await workflow.execute_activity(pack, item, start_to_close_timeout=timedelta(seconds=10))
        await workflow.wait_condition(lambda: self.sealed and workflow.all_handlers_finished())
        return f"{packed}, labelled {', '.join(self.labels)}"

    @workflow.signal
    def label(self, text: str) -> None:
        self.labels.append(text)

    @workflow.query
    def labels_so_far(self) -> list[str]:
        return self.labels

    @workflow.update
    def seal(self) -> int:
        self.sealed = True
        return len(self.labels)


class _ClientTracer(OutboundInterceptor):
    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle:
        print(f"client: start {input.workflow} {list(input.args)}")
        return await super().start_workflow(input)

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        print(f"client: signal {input.signal} {list(input.args)}")
        await super().signal_workflow(input)

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        print(f"client: query {input.query}")
        return await super().query_workflow(input)

    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle:
        print(f"client: update {input.update} {list(input.args)}")
        return await super().start_workflow_update(input)


class _ActivityTracer(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        header = input.headers.get(TRACE_HEADER)
        trace = activity.payload_converter().from_payload(header) if header else "none"
        print(f"activity: {activity.info().activity_type} with trace {trace}")
        result = await super().execute_activity(input)
        return f"{result} [{trace}]"


class _WorkflowOutboundTracer(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> asyncio.Task[Any]:
        trace = f"{workflow.info().workflow_id}/{input.activity}"
        input.headers = {**input.headers, TRACE_HEADER: workflow.payload_converter().to_payload(trace)}
        _note(f"workflow: start activity {input.activity}")
        return super().start_activity(input)


class _WorkflowInboundTracer(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_WorkflowOutboundTracer(outbound))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        _note(f"workflow: run {input.type.__name__} {list(input.args)}")
        return await super().execute_workflow(input)

    async def handle_signal(self, input: HandleSignalInput) -> None:
        _note(f"workflow: signal {input.signal}")
        await super().handle_signal(input)


def _note(line: str) -> None:
    if not workflow.unsafe.is_replaying():
        WORKFLOW_TRACE.append(line)


class TracingInterceptor(ClientInterceptor, Interceptor):
    """A client interceptor that is also a worker interceptor."""

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _ClientTracer(next)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityTracer(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _WorkflowInboundTracer


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config, interceptors=[TracingInterceptor()])
    task_queue = f"parcels-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[Parcel], activities=[pack]):
        handle = await client.start_workflow(
            Parcel.run, "book", id=f"parcel-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        await handle.signal(Parcel.label, "fragile")
        print(f"Sealed with labels: {await handle.execute_update(Parcel.seal)}")
        print(f"Labels: {await handle.query(Parcel.labels_so_far)}")
        print(f"Workflow result: {await handle.result()}")
    for line in WORKFLOW_TRACE:
        print(line)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
