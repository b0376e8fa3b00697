"""Interceptors end to end, against the real server processes: a client interceptor sees the
start, signal, query and update; an activity interceptor wraps each attempt (and reads the
header the workflow's outbound interceptor put on it); a workflow interceptor sees the run, a
signal, an update and the activities it starts, live, when the worker replays the run from
history (no cache), and in the Replayer. The example program runs too."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from sdk import activity, workflow
from sdk.api.common.v1 import Payload
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
from sdk.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    Replayer,
    StartActivityInput,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)
from tests.conftest import Stack, Tenant
from tests.e2e.test_sdk_temporal_examples import _run_example

# What the workflow interceptor saw: (call, replaying). The workflow runs in this process.
WORKFLOW_CALLS: list[tuple[str, bool]] = []


def _json(value: str) -> Payload:
    return Payload({"encoding": b"json/plain"}, f'"{value}"'.encode())


@activity.defn
async def shout(text: str) -> str:
    return text.upper()


@workflow.defn
class Loud:
    def __init__(self) -> None:
        self.words: list[str] = []
        self.done = False

    @workflow.run
    async def run(self, text: str) -> str:
        first = await workflow.execute_activity(shout, text, start_to_close_timeout=timedelta(seconds=10))
        await workflow.wait_condition(lambda: self.done and workflow.all_handlers_finished())
        return " ".join([first, *self.words])

    @workflow.signal
    def add(self, word: str) -> None:
        self.words.append(word)

    @workflow.query
    def words_so_far(self) -> list[str]:
        return self.words

    @workflow.update
    def finish(self) -> int:
        self.done = True
        return len(self.words)


class _Outbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> asyncio.Task[Any]:
        WORKFLOW_CALLS.append((f"start_activity {input.activity}", workflow.unsafe.is_replaying()))
        input.headers = {**input.headers, "tone": _json("loud")}
        return super().start_activity(input)


class _Inbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_Outbound(outbound))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        WORKFLOW_CALLS.append((f"execute_workflow {list(input.args)}", workflow.unsafe.is_replaying()))
        return await super().execute_workflow(input)

    async def handle_signal(self, input: HandleSignalInput) -> None:
        WORKFLOW_CALLS.append((f"handle_signal {input.signal}", workflow.unsafe.is_replaying()))
        await super().handle_signal(input)

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        header = input.headers.get("caller")
        caller = json.loads(header.data) if header else "-"
        WORKFLOW_CALLS.append((f"handle_update {input.update} from {caller}", workflow.unsafe.is_replaying()))
        return await super().handle_update_handler(input)


class _ActivityInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        tone = input.headers.get("tone")
        result = await super().execute_activity(input)
        said = json.loads(tone.data) if tone else "no header"
        return f"{result} ({said}, {activity.info().activity_type})"


class Everything(ClientInterceptor, Interceptor):
    """One interceptor for the client and (through the client) its worker."""

    def __init__(self) -> None:
        self.client_calls: list[str] = []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        calls = self.client_calls

        class Link(OutboundInterceptor):
            async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle:
                calls.append(f"start {input.workflow} {list(input.args)}")
                return await super().start_workflow(input)

            async def signal_workflow(self, input: SignalWorkflowInput) -> None:
                calls.append(f"signal {input.signal} {list(input.args)}")
                await super().signal_workflow(input)

            async def query_workflow(self, input: QueryWorkflowInput) -> Any:
                calls.append(f"query {input.query}")
                return await super().query_workflow(input)

            async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle:
                calls.append(f"update {input.update}")
                input.headers = {**input.headers, "caller": _json("the test")}
                return await super().start_workflow_update(input)

        return Link(next)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityInbound(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _Inbound


def test_interceptors_see_client_activity_and_workflow_calls_live_and_on_replay(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    everything = Everything()
    WORKFLOW_CALLS.clear()

    async def scenario() -> None:
        client = await Client.connect(
            stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"], interceptors=[everything]
        )
        # No cache: every workflow task replays the run from its history first.
        async with Worker(
            client, task_queue=queue, workflows=[Loud], activities=[shout], max_cached_workflows=0
        ):
            handle = await client.start_workflow(
                Loud.run, "hi", id=f"loud-{uuid.uuid4().hex[:8]}", task_queue=queue
            )
            await handle.signal(Loud.add, "there")
            assert await handle.execute_update(Loud.finish) == 1
            assert await handle.query(Loud.words_so_far) == ["there"]
            assert await handle.result() == "HI (loud, shout) there"
            history = await handle.fetch_history()
        await client.close()
        live = [call for call, replaying in WORKFLOW_CALLS if not replaying]
        assert live == [
            "execute_workflow ['hi']",
            "start_activity shout",
            "handle_signal add",
            "handle_update finish from the test",
        ], WORKFLOW_CALLS
        replayed_by_worker = {call for call, replaying in WORKFLOW_CALLS if replaying}
        assert {"execute_workflow ['hi']", "start_activity shout"} <= replayed_by_worker, WORKFLOW_CALLS

        WORKFLOW_CALLS.clear()
        Replayer(workflows=[Loud], interceptors=[everything]).replay_workflow(history)
        assert [(call, True) for call in live] == WORKFLOW_CALLS

    asyncio.run(scenario())
    assert everything.client_calls == [
        "start Loud ['hi']",
        "signal add ['there']",
        "update finish",
        "query words_so_far",
    ]


def test_the_interceptors_example_prints_what_it_documents(
    stack: Stack, tenant: Tenant, tmp_path: Path
) -> None:
    output = _run_example(stack, tenant, "examples.interceptors", tmp_path)
    for line in (
        "client: start Parcel ['book']",
        "client: signal label ['fragile']",
        "client: update seal []",
        "client: query labels_so_far",
        "activity: pack with trace parcel-",
        "Sealed with labels: 1",
        "Labels: ['fragile']",
        "Workflow result: book packed [parcel-",
        "/pack], labelled fragile",
        "workflow: run Parcel ['book']",
        "workflow: start activity pack",
        "workflow: signal label",
    ):
        assert line in output, output
