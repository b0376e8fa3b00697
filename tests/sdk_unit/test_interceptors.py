"""Interceptors: the client's chain, and a workflow run's inbound and outbound chains, live and
on replay (no server needed: the client's calls stop in an interceptor, workflows run over
histories shaped like the server's)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from sdk import workflow
from sdk._http import HttpTransport
from sdk.api.common.v1 import Payload
from sdk.client import (
    Client,
    OutboundInterceptor,
    QueryWorkflowInput,
    SignalWorkflowInput,
    StartWorkflowInput,
    StartWorkflowUpdateInput,
    WorkflowUpdateStage,
)
from sdk.client import Interceptor as ClientInterceptor
from sdk.converter import DataConverter
from sdk.worker import (
    ExecuteWorkflowInput,
    HandleQueryInput,
    HandleSignalInput,
    Interceptor,
    Replayer,
    StartActivityInput,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)
from sdk.workflow._definition import WorkflowDefinition
from tests.sdk_unit._history import HistoryBuilder, payload
from tests.sdk_unit._history import new_instance as _plain_instance


@workflow.defn(name="Watched")
class Watched:
    def __init__(self) -> None:
        self.pokes: list[str] = []

    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(
            "compose", name, start_to_close_timeout=timedelta(seconds=5)
        )
        await workflow.wait_condition(lambda: bool(self.pokes))
        return f"{greeting} {self.pokes[0]} ({workflow.info().workflow_id})"

    @workflow.signal
    def poke(self, value: str) -> None:
        self.pokes.append(value)

    @workflow.query
    def seen(self) -> list[str]:
        return self.pokes


class Recorder(Interceptor):
    """Records every workflow call it sees, as ``(tag, what)``; stamps a header on activities."""

    def __init__(self, tag: str, seen: list[tuple[str, str]]) -> None:
        self.tag, self.seen = tag, seen

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        tag, seen = self.tag, self.seen

        class Outbound(WorkflowOutboundInterceptor):
            def info(self) -> workflow.Info:
                seen.append((tag, "info"))
                return super().info()

            def start_activity(self, input: StartActivityInput) -> Any:
                seen.append(
                    (tag, f"start_activity {input.activity} {input.args} {input.start_to_close_timeout}")
                )
                input.headers = {**input.headers, tag: Payload({"encoding": b"json/plain"}, b'"on"')}
                return super().start_activity(input)

        class Inbound(WorkflowInboundInterceptor):
            def init(self, outbound: WorkflowOutboundInterceptor) -> None:
                seen.append((tag, "init"))
                super().init(Outbound(outbound))

            async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
                seen.append((tag, f"execute_workflow {input.type.__name__} {list(input.args)}"))
                return await super().execute_workflow(input)

            async def handle_signal(self, input: HandleSignalInput) -> None:
                seen.append((tag, f"handle_signal {input.signal} {list(input.args)}"))
                await super().handle_signal(input)

            async def handle_query(self, input: HandleQueryInput) -> Any:
                seen.append((tag, f"handle_query {input.query}"))
                return [*(await super().handle_query(input)), tag]

        return Inbound


def _instance(interceptors: list[Interceptor]) -> Any:
    plain = _plain_instance(Watched)
    return type(plain)(
        WorkflowDefinition.from_class(Watched), plain.info, DataConverter(), interceptors=interceptors
    )


def _history() -> HistoryBuilder:
    history = HistoryBuilder("Watched", "ada")
    history.task()
    wtc = history.completed()
    scheduled = history.activity_scheduled("compose", "1", wtc)
    history.activity_completed(scheduled, "hello ada")
    history.add("WorkflowExecutionSignaled", signal_name="poke", input=[payload("x")])
    history.task()
    return history


def test_a_workflow_runs_through_its_interceptors_first_one_outermost() -> None:
    seen: list[tuple[str, str]] = []
    history = HistoryBuilder("Watched", "ada")
    history.task()
    activation = _instance([Recorder("a", seen), Recorder("b", seen)]).activate(history.events)
    assert seen == [
        ("a", "init"),
        ("b", "init"),
        ("a", "execute_workflow Watched ['ada']"),
        ("b", "execute_workflow Watched ['ada']"),
        # Each inbound link wraps the outbound it is given before passing it on: the last
        # one's outbound link is outermost (Temporal's rule).
        ("b", "start_activity compose ['ada'] 0:00:05"),
        ("a", "start_activity compose ['ada'] 0:00:05"),
    ]
    [command] = activation.commands
    assert command["attributes"]["header"] == {
        "a": {"metadata": {"encoding": "json/plain"}, "data": "on"},
        "b": {"metadata": {"encoding": "json/plain"}, "data": "on"},
    }
    assert command["attributes"]["start_to_close_timeout"] == 5.0


def test_signals_queries_and_info_go_through_the_chain_and_replay_the_same() -> None:
    seen: list[tuple[str, str]] = []
    instance = _instance([Recorder("a", seen)])
    history = _history()
    activation = instance.activate(history.events)
    assert activation.completed
    result = activation.commands[-1]["attributes"]["result"]
    assert result == [payload("hello ada x (wf-1)")]
    assert ("a", "handle_signal poke ['x']") in seen
    assert ("a", "info") in seen
    answer = instance.query("seen", [])
    assert answer == payload(["x", "a"])
    assert seen[-1] == ("a", "handle_query seen")

    # Replay: the same history, the same calls, the same commands (the replayer has no server).
    replayed: list[tuple[str, str]] = []
    wtc = history.completed()
    history.add("WorkflowExecutionCompleted", result=result, workflow_task_completed_event_id=wtc)
    Replayer(workflows=[Watched], interceptors=[Recorder("a", replayed)]).replay_workflow(
        {"workflow_id": "wf-1", "run_id": "run-1", "events": history.events}
    )
    assert replayed == seen[:-1]


def test_without_workflow_interceptors_the_run_has_no_chain() -> None:
    instance = _instance([Interceptor()])
    assert instance._inbound is None and instance._outbound is None
    assert _instance([Recorder("a", [])])._outbound is not None


class Stop(ClientInterceptor):
    """Answers every client call itself, recording its input, so no server is needed."""

    def __init__(self, tag: str, seen: list[Any], answer: bool = False) -> None:
        self.tag, self.seen, self.answer = tag, seen, answer

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        tag, seen, answer = self.tag, self.seen, self.answer

        class Link(OutboundInterceptor):
            async def start_workflow(self, input: StartWorkflowInput) -> Any:
                seen.append((tag, input))
                return "handle" if answer else await super().start_workflow(input)

            async def signal_workflow(self, input: SignalWorkflowInput) -> None:
                seen.append((tag, input))
                if not answer:
                    await super().signal_workflow(input)

            async def query_workflow(self, input: QueryWorkflowInput) -> Any:
                seen.append((tag, input))
                return "answer" if answer else await super().query_workflow(input)

            async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> Any:
                seen.append((tag, input))
                return "update" if answer else await super().start_workflow_update(input)

        return Link(next)


class Both(Stop, Interceptor):
    """A client interceptor that is a worker interceptor too."""


@pytest.fixture
def transport() -> HttpTransport:
    return HttpTransport("http://127.0.0.1:9", "default", None)


def test_client_calls_go_through_the_chain_in_list_order(transport: HttpTransport) -> None:
    asyncio.run(_client_calls(transport))


async def _client_calls(transport: HttpTransport) -> None:
    seen: list[Any] = []
    client = Client(
        transport,
        data_converter=DataConverter(),
        identity="me",
        interceptors=[Stop("outer", seen), Stop("inner", seen, answer=True)],
    )
    assert await client.start_workflow(Watched.run, "ada", id="w1", task_queue="q") == "handle"  # type: ignore[comparison-overlap]
    [(first, started), (second, same)] = seen
    assert (first, second) == ("outer", "inner") and started is same
    assert started.workflow == "Watched" and list(started.args) == ["ada"] and started.id == "w1"
    assert started.ret_type is str and started.task_queue == "q" and started.headers == {}

    seen.clear()
    handle = client.get_workflow_handle("w1", run_id="r1")
    await handle.signal(Watched.poke, "x")
    assert await handle.query(Watched.seen) == "answer"
    stage = WorkflowUpdateStage.ACCEPTED
    assert await handle.start_update("bump", 1, id="u1", wait_for_stage=stage) == "update"  # type: ignore[comparison-overlap]
    kinds = [(tag, type(i).__name__) for tag, i in seen]
    assert kinds == [
        ("outer", "SignalWorkflowInput"),
        ("inner", "SignalWorkflowInput"),
        ("outer", "QueryWorkflowInput"),
        ("inner", "QueryWorkflowInput"),
        ("outer", "StartWorkflowUpdateInput"),
        ("inner", "StartWorkflowUpdateInput"),
    ]
    signal, query, update = seen[1][1], seen[3][1], seen[5][1]
    assert (signal.id, signal.run_id, signal.signal, list(signal.args)) == ("w1", "r1", "poke", ["x"])
    assert (query.query, query.ret_type) == ("seen", list[str])
    assert (update.update, update.update_id, list(update.args)) == ("bump", "u1", [1])
    await client.close()


def test_a_worker_takes_the_clients_worker_interceptors_first(transport: HttpTransport) -> None:
    asyncio.run(_worker_interceptors(transport))


async def _worker_interceptors(transport: HttpTransport) -> None:
    both, own = Both("both", []), Recorder("own", [])
    client = Client(
        transport,
        data_converter=DataConverter(),
        identity="me",
        interceptors=[Stop("client only", []), both],
    )
    worker = Worker(client, task_queue="q", workflows=[Watched], interceptors=[own])
    assert worker.interceptors == [both, own]
    await client.close()
