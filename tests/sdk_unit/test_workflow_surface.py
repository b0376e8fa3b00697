"""Temporal's workflow-side names on the workflow instance, against server-shaped histories."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random as stdlib_random
import time
import uuid
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from sdk import workflow
from sdk._runtime.instance import WorkflowInstance, WorkflowTaskError
from sdk.common import RawValue
from sdk.converter import DataConverter
from sdk.exceptions import ReadOnlyContextError, RestrictedWorkflowAccessError
from sdk.workflow._definition import WorkflowDefinition
from tests.sdk_unit._history import START, HistoryBuilder, command_types, new_instance, payload


def _completed_with(instance: WorkflowInstance, history: HistoryBuilder) -> Any:
    activation = instance.activate(history.events)
    [command] = [c for c in activation.commands if c["command_type"] == "CompleteWorkflowExecution"]
    return command["attributes"]["result"][0]["data"]


@workflow.defn(name="Unsafe")
class Unsafe:
    @workflow.run
    async def run(self) -> list[Any]:
        with workflow.unsafe.imports_passed_through():
            import json  # noqa: F401 - imported as ported code does
        seen = [workflow.unsafe.is_replaying(), workflow.unsafe.in_sandbox(), workflow.in_workflow()]
        await workflow.sleep(1)
        return [*seen, workflow.unsafe.is_replaying(), workflow.unsafe.is_read_only()]


def test_unsafe_reports_replay_state_and_passes_imports_through() -> None:
    history = HistoryBuilder("Unsafe")
    history.task()
    live = new_instance(Unsafe)
    live.activate(history.events)
    wtc = history.completed()
    timer = history.timer("1", 1.0, wtc)
    history.add("TimerFired", timer_id="1", started_event_id=timer)
    history.task(advance=1)
    # A fresh instance replays the first task, then runs the second live.
    assert _completed_with(new_instance(Unsafe), history) == [True, False, True, False, False]


@workflow.defn(name="Dynamic")
class Dynamic:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: "late:1" in self.seen)
        return self.seen

    @workflow.signal(dynamic=True)
    def anything(self, name: str, args: Sequence[RawValue]) -> None:
        values = [workflow.payload_converter().from_payload(a.payload) for a in args]
        self.seen.append(f"dynamic {name}:{values}")
        if name == "install":
            workflow.set_signal_handler("late", lambda n: self.seen.append(f"late:{n}"))

    @workflow.query(dynamic=True)
    def ask(self, name: str, args: Sequence[RawValue]) -> str:
        return f"{name}? {len(self.seen)}"


def test_dynamic_handlers_and_a_handler_set_at_run_time_get_buffered_signals() -> None:
    history = HistoryBuilder("Dynamic")
    history.add("WorkflowExecutionSignaled", signal_name="install", input=[payload("x"), payload(2)])
    history.add("WorkflowExecutionSignaled", signal_name="late", input=[payload(1)])
    history.task()
    instance = new_instance(Dynamic)
    # "install" reaches the dynamic handler, which sets a named handler that takes "late".
    assert _completed_with(instance, history) == ["dynamic install:['x', 2]", "late:1"]
    assert instance.query("anything", []) == payload("anything? 2")


@workflow.defn(name="Buffered")
class Buffered:
    def __init__(self) -> None:
        self.got: list[int] = []

    @workflow.run
    async def run(self) -> list[int]:
        workflow.set_signal_handler("num", self.got.append)
        await workflow.wait_condition(lambda: len(self.got) >= 2)
        assert workflow.get_signal_handler("num") is not None
        return self.got


def test_signals_wait_in_order_for_a_handler_set_later() -> None:
    history = HistoryBuilder("Buffered")
    history.add("WorkflowExecutionSignaled", signal_name="num", input=[payload(1)])
    history.add("WorkflowExecutionSignaled", signal_name="num", input=[payload(2)])
    history.task()
    assert _completed_with(new_instance(Buffered), history) == [1, 2]


@workflow.defn(name="Handlers")
class Handlers:
    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> list[bool]:
        await asyncio.sleep(0)
        before = workflow.all_handlers_finished()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return [before, workflow.all_handlers_finished(), self.done]

    @workflow.signal
    async def slow(self) -> None:
        await workflow.sleep(5)
        self.done = True

    @workflow.query
    def poke(self) -> None:
        workflow.upsert_search_attributes({"Tag": ["x"]})


def test_all_handlers_finished_waits_for_async_signal_handlers() -> None:
    history = HistoryBuilder("Handlers")
    history.add("WorkflowExecutionSignaled", signal_name="slow", input=[])
    history.task()
    instance = new_instance(Handlers)
    assert command_types(instance.activate(history.events).commands) == ["StartTimer"]
    with pytest.raises(Exception, match="read-only") as raised:
        instance.query("poke", [])
    assert isinstance(raised.value.__cause__, ReadOnlyContextError)
    first_new = len(history.events)
    wtc = history.completed()
    timer = history.timer("1", 5.0, wtc)
    history.add("TimerFired", timer_id="1", started_event_id=timer)
    history.task(advance=5)
    assert _completed_with(instance, _Tail(history, first_new)) == [False, True, True]


class _Tail(HistoryBuilder):
    """The events from ``first`` on, for activating a cached instance."""

    def __init__(self, history: HistoryBuilder, first: int) -> None:
        self.events = history.events[first:]


@workflow.defn(name="Waits")
class Waits:
    @workflow.run
    async def run(self) -> list[Any]:
        slow = asyncio.ensure_future(workflow.sleep(10))
        fast = asyncio.ensure_future(asyncio.sleep(0))
        done, pending = await workflow.wait([slow, fast], return_when=asyncio.FIRST_COMPLETED)
        slow.cancel()
        return [done == [fast], pending == [slow]]


def test_wait_returns_lists_in_the_order_given() -> None:
    history = HistoryBuilder("Waits")
    history.task()
    activation = new_instance(Waits).activate(history.events)
    assert command_types(activation.commands) == ["CompleteWorkflowExecution"]
    assert activation.commands[0]["attributes"]["result"] == [payload([True, True])]


@workflow.defn(name="Clocky")
class Clocky:
    @workflow.run
    async def run(self, what: str) -> str:
        calls = {
            "time": time.time,
            "datetime": datetime.now,
            "random": lambda: stdlib_random.randint(1, 6),
            "uuid": uuid.uuid4,
            "sleep": lambda: time.sleep(0),
            "open": lambda: open("/dev/null"),  # noqa: SIM115 - the call is what is refused
        }
        if what == "lifted":
            with workflow.unsafe.sandbox_unrestricted():
                time.time()
            return "ok"
        calls[what]()
        return "ok"


def _guarded_instance(guard: bool) -> WorkflowInstance:
    definition = WorkflowDefinition.from_class(Clocky)
    info = workflow.Info("wf-1", "run-1", "Clocky", "q", "default", START)
    return WorkflowInstance(definition, info, DataConverter(), determinism_guard=guard)


@pytest.mark.parametrize(
    ("what", "hint"),
    [
        ("time", "workflow.time()"),
        ("datetime", "workflow.now()"),
        ("random", "workflow.random()"),
        ("uuid", "workflow.uuid4()"),
        ("sleep", "workflow.sleep()"),
        ("open", "activity"),
    ],
)
def test_the_guard_refuses_nondeterministic_calls_and_names_the_replacement(what: str, hint: str) -> None:
    history = HistoryBuilder("Clocky", what)
    history.task()
    with pytest.raises(WorkflowTaskError, match="RestrictedWorkflowAccessError") as raised:
        _guarded_instance(True).activate(history.events)
    assert isinstance(raised.value.__cause__, RestrictedWorkflowAccessError)
    assert hint in str(raised.value)
    # Off, the same code runs; and outside workflow code the calls are untouched.
    assert command_types(_guarded_instance(False).activate(history.events).commands) == [
        "CompleteWorkflowExecution"
    ]
    assert isinstance(time.time(), float) and datetime.now(UTC).year >= 2026


def test_sandbox_unrestricted_lifts_the_guard() -> None:
    history = HistoryBuilder("Clocky", "lifted")
    history.task()
    assert command_types(_guarded_instance(True).activate(history.events).commands) == [
        "CompleteWorkflowExecution"
    ]


class Boom(Exception):
    pass


@workflow.defn(name="Failing", failure_exception_types=[Boom])
class Failing:
    @workflow.run
    async def run(self) -> None:
        raise Boom("listed")


def test_failure_exception_types_fail_the_run_not_the_task() -> None:
    history = HistoryBuilder("Failing")
    history.task()
    [command] = new_instance(Failing).activate(history.events).commands
    assert command["command_type"] == "FailWorkflowExecution"
    assert command["attributes"]["failure"]["application_failure_info"]["type"] == "Boom"


@workflow.defn(name="Logs")
class Logs:
    @workflow.run
    async def run(self) -> None:
        workflow.logger.info("hello")


def test_workflow_logger_carries_the_run_and_is_silent_on_replay(caplog: pytest.LogCaptureFixture) -> None:
    history = HistoryBuilder("Logs")
    history.task()
    with caplog.at_level(logging.INFO, logger="sdk.workflow"):
        new_instance(Logs).activate(history.events)
    [record] = caplog.records
    assert record.temporal_workflow["workflow_id"] == "wf-1"  # type: ignore[attr-defined]
    assert "'run_id': 'run-1'" in record.getMessage()
    history.completed()
    history.add("WorkflowExecutionCompleted", result=None)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sdk.workflow"):
        new_instance(Logs).activate(history.events)
    assert caplog.records == []


def test_defn_refuses_a_second_decoration_and_name_with_dynamic() -> None:
    with pytest.raises(ValueError, match="already contains"):
        workflow.defn(Logs)
    with pytest.raises(ValueError, match="both a name and dynamic"):
        workflow.defn(name="X", dynamic=True)(type("X", (), {"run": workflow.run(Logs.run)}))


@workflow.defn(name="Completes")
class Completes:
    @workflow.run
    async def run(self) -> list[Any]:
        async def after(seconds: float, label: str) -> str:
            await workflow.sleep(seconds)
            return label

        order = [await f for f in workflow.as_completed([after(2, "slow"), after(1, "b"), after(1, "a")])]
        return [order, workflow.memo_value("owner"), workflow.memo_value("missing", "none")]


def test_as_completed_is_deterministic_and_memo_value_decodes() -> None:
    history = HistoryBuilder("Completes")
    history.events[0]["attributes"]["memo"] = {"owner": payload("billing")}
    history.task()
    instance = new_instance(Completes)
    instance.info = dataclasses.replace(instance.info, memo={"owner": payload("billing")})
    assert command_types(instance.activate(history.events).commands) == ["StartTimer"] * 3
    first_new = len(history.events)
    wtc = history.completed()
    timers = [history.timer(str(n), s, wtc) for n, s in ((1, 2.0), (2, 1.0), (3, 1.0))]
    history.add("TimerFired", timer_id="2", started_event_id=timers[1])
    history.add("TimerFired", timer_id="3", started_event_id=timers[2])
    history.task(advance=1)
    assert command_types(instance.activate(history.events[first_new:]).commands) == []
    first_new = len(history.events)
    history.completed()
    history.add("TimerFired", timer_id="1", started_event_id=timers[0])
    history.task(advance=1)
    assert _completed_with(instance, _Tail(history, first_new)) == [["b", "a", "slow"], "billing", "none"]


@workflow.defn(name="Hasty")
class Hasty:
    @workflow.run
    async def run(self) -> None:
        await asyncio.sleep(0)  # the signals' handlers start, then the run returns at once

    @workflow.signal
    async def slow(self) -> None:
        await workflow.sleep(5)

    @workflow.signal(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def expendable(self) -> None:
        await workflow.sleep(5)


@pytest.mark.parametrize(("signal_name", "warns"), [("slow", True), ("expendable", False)])
def test_completing_with_a_handler_running_warns_unless_it_may_be_abandoned(
    signal_name: str, warns: bool
) -> None:
    history = HistoryBuilder("Hasty")
    history.add("WorkflowExecutionSignaled", signal_name=signal_name, input=[])
    history.task()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        commands = new_instance(Hasty).activate(history.events).commands
    assert "CompleteWorkflowExecution" in command_types(commands)
    found = [w for w in caught if issubclass(w.category, workflow.UnfinishedSignalHandlersWarning)]
    assert bool(found) is warns
    if warns:
        assert "TMPRL1102" in str(found[0].message) and "'slow'" in str(found[0].message)
