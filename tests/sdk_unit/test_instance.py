"""The workflow instance against histories shaped like the server's (no server needed)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest

from sdk import workflow
from sdk._runtime.instance import WorkflowTaskError
from sdk.exceptions import ApplicationError, NondeterminismError
from tests.sdk_unit._history import HistoryBuilder, command_types, new_instance, payload

HISTORIES = Path(__file__).parent / "histories"


@workflow.defn(name="Greet")
class Greet:
    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(
            "compose", name, start_to_close_timeout=timedelta(seconds=5)
        )
        await workflow.sleep(30)
        return f"{greeting}!"


@workflow.defn(name="Greet")
class GreetChanged:
    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.execute_activity("shout", name, start_to_close_timeout=timedelta(seconds=5))
        return "changed"


def test_first_task_schedules_activity_with_server_attributes() -> None:
    history = HistoryBuilder("Greet", "ada")
    history.task()
    activation = new_instance(Greet).activate(history.events)
    assert activation.commands == [
        {
            "command_type": "ScheduleActivityTask",
            "attributes": {
                "activity_id": "1",
                "activity_type": {"name": "compose"},
                "task_queue": {"name": "q"},
                "input": [payload("ada")],
                "schedule_to_close_timeout": None,
                "schedule_to_start_timeout": None,
                "start_to_close_timeout": 5.0,
                "heartbeat_timeout": None,
                "retry_policy": None,
            },
        }
    ]
    assert not activation.completed


def _greet_history_until_timer() -> HistoryBuilder:
    history = HistoryBuilder("Greet", "ada")
    history.task()
    wtc = history.completed()
    scheduled = history.activity_scheduled("compose", "1", wtc)
    history.activity_completed(scheduled, "hello ada")
    history.task(advance=2)
    return history


def test_replay_then_timer_then_completion() -> None:
    history = _greet_history_until_timer()
    instance = new_instance(Greet)
    activation = instance.activate(history.events)
    assert activation.commands == [
        {"command_type": "StartTimer", "attributes": {"timer_id": "2", "start_to_fire_timeout": 30.0}}
    ]
    # The sticky path: only new events for the cached instance.
    first_new = len(history.events)
    wtc = history.completed()
    history.timer("2", 30.0, wtc)
    history.add("TimerFired", timer_id="2", started_event_id=wtc + 1)
    history.task(advance=30)
    activation = instance.activate(history.events[first_new:])
    assert activation.completed
    assert activation.commands == [
        {
            "command_type": "CompleteWorkflowExecution",
            "attributes": {"result": [payload("hello ada!")]},
        }
    ]
    assert instance.last_event_id == len(history.events)


def test_full_replay_from_fixture_gives_same_commands_as_sticky() -> None:
    events = json.loads((HISTORIES / "greet_completed_timer.json").read_text())["events"]
    activation = new_instance(Greet).activate(events)
    assert command_types(activation.commands) == ["CompleteWorkflowExecution"]


def test_changed_activity_type_is_nondeterminism_naming_both() -> None:
    history = _greet_history_until_timer()
    with pytest.raises(NondeterminismError) as caught:
        new_instance(GreetChanged).activate(history.events)
    assert "'shout'" in str(caught.value) and "'compose'" in str(caught.value)
    assert "ScheduleActivityTask" in str(caught.value)


@workflow.defn(name="Greet")
class GreetExtraStep:
    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(1)
        return "x"


def test_new_step_instead_of_recorded_activity_is_nondeterminism() -> None:
    history = _greet_history_until_timer()
    with pytest.raises(NondeterminismError, match="StartTimer"):
        new_instance(GreetExtraStep).activate(history.events)


@workflow.defn(name="Greet")
class GreetNoSteps:
    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.wait_condition(lambda: False)
        return name


def test_removed_step_is_nondeterminism() -> None:
    history = _greet_history_until_timer()
    with pytest.raises(NondeterminismError, match="issued no command"):
        new_instance(GreetNoSteps).activate(history.events)


@workflow.defn
class Approval:
    def __init__(self) -> None:
        self.approvals: list[str] = []

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: len(self.approvals) >= 2)
        return self.approvals

    @workflow.signal(name="approve")
    def approve(self, who: str) -> None:
        self.approvals.append(who)

    @workflow.query
    def count(self) -> int:
        return len(self.approvals)


def test_signals_in_order_then_condition_and_query() -> None:
    history = HistoryBuilder("Approval")
    history.add("WorkflowExecutionSignaled", signal_name="approve", input=[payload("a")])
    history.task()
    instance = new_instance(Approval)
    assert instance.activate(history.events).commands == []
    assert instance.query("count", []) == payload(1)
    first_new = len(history.events)
    history.completed()
    history.add("WorkflowExecutionSignaled", signal_name="approve", input=[payload("b")])
    history.task()
    activation = instance.activate(history.events[first_new:])
    assert activation.commands[0]["attributes"]["result"] == [payload(["a", "b"])]


@workflow.defn
class Timeouts:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.wait_condition(lambda: False, timeout=10)
        except TimeoutError:
            return "timed out"
        return "satisfied"


def test_wait_condition_timeout_is_a_durable_timer() -> None:
    history = HistoryBuilder("Timeouts")
    history.task()
    instance = new_instance(Timeouts)
    assert command_types(instance.activate(history.events).commands) == ["StartTimer"]
    first_new = len(history.events)
    wtc = history.completed()
    started = history.timer("1", 10.0, wtc)
    history.add("TimerFired", timer_id="1", started_event_id=started)
    history.task(advance=10)
    activation = instance.activate(history.events[first_new:])
    assert activation.commands[0]["attributes"]["result"] == [payload("timed out")]


@workflow.defn
class Race:
    @workflow.run
    async def run(self) -> str:
        slow = asyncio.ensure_future(workflow.sleep(100))
        fast = asyncio.ensure_future(workflow.sleep(5))
        done, _ = await asyncio.wait([slow, fast], return_when=asyncio.FIRST_COMPLETED)
        slow.cancel()
        await asyncio.gather(fast)
        return "fast won" if fast in done else "slow won"


def test_cancelled_timer_emits_cancel_timer() -> None:
    history = HistoryBuilder("Race")
    history.task()
    instance = new_instance(Race)
    assert command_types(instance.activate(history.events).commands) == ["StartTimer", "StartTimer"]
    first_new = len(history.events)
    wtc = history.completed()
    history.timer("1", 100.0, wtc)
    fast = history.timer("2", 5.0, wtc)
    history.add("TimerFired", timer_id="2", started_event_id=fast)
    history.task(advance=5)
    activation = instance.activate(history.events[first_new:])
    assert activation.commands == [
        {"command_type": "CancelTimer", "attributes": {"timer_id": "1"}},
        {"command_type": "CompleteWorkflowExecution", "attributes": {"result": [payload("fast won")]}},
    ]


@workflow.defn
class Failing:
    @workflow.run
    async def run(self, kind: str) -> None:
        if kind == "app":
            raise ApplicationError("nope", type="Rejected", non_retryable=True)
        raise ValueError("a bug")


def test_application_error_fails_workflow_other_errors_fail_task() -> None:
    history = HistoryBuilder("Failing", "app")
    history.task()
    activation = new_instance(Failing).activate(history.events)
    failure = activation.commands[0]["attributes"]["failure"]
    assert activation.commands[0]["command_type"] == "FailWorkflowExecution"
    assert failure["application_failure_info"]["type"] == "Rejected"
    bug = HistoryBuilder("Failing", "bug")
    bug.task()
    with pytest.raises(WorkflowTaskError, match="a bug"):
        new_instance(Failing).activate(bug.events)


def test_cancel_request_cancels_main_coroutine() -> None:
    history = HistoryBuilder("Approval")
    history.task()
    instance = new_instance(Approval)
    instance.activate(history.events)
    first_new = len(history.events)
    history.completed()
    history.add("WorkflowExecutionCancelRequested", cause="", identity="me")
    history.task()
    activation = instance.activate(history.events[first_new:])
    assert command_types(activation.commands) == ["CancelWorkflowExecution"]


@workflow.defn
class Patched:
    @workflow.run
    async def run(self) -> str:
        return "new" if workflow.patched("v2") else "old"


def test_patch_marker_recorded_when_new_and_old_path_on_old_history() -> None:
    history = HistoryBuilder("Patched")
    history.task()
    activation = new_instance(Patched).activate(history.events)
    assert command_types(activation.commands) == ["RecordMarker", "CompleteWorkflowExecution"]
    assert activation.commands[0]["attributes"]["marker_name"] == "core_patch"
    old = HistoryBuilder("Patched")
    old.task()
    wtc = old.completed()
    old.add("WorkflowExecutionCompleted", result=[payload("old")], workflow_task_completed_event_id=wtc)
    # Replaying a run recorded before the patch: the old path, and no marker to match.
    assert new_instance(Patched).activate(old.events).commands == []
    marked = HistoryBuilder("Patched")
    marked.task()
    wtc = marked.completed()
    marked.add(
        "MarkerRecorded", marker_name="core_patch", details=activation.commands[0]["attributes"]["details"]
    )
    marked.add("WorkflowExecutionCompleted", result=[payload("new")], workflow_task_completed_event_id=wtc)
    assert new_instance(Patched).activate(marked.events).commands == []


@workflow.defn(name="Greet")
class GreetReordered:
    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(30)
        await workflow.execute_activity("compose", name, start_to_close_timeout=timedelta(seconds=5))
        return "reordered"


def test_reordered_steps_are_nondeterminism() -> None:
    history = _greet_history_until_timer()
    with pytest.raises(NondeterminismError, match=r"StartTimer.*ActivityTaskScheduled"):
        new_instance(GreetReordered).activate(history.events)


@workflow.defn
class Tagging:
    @workflow.run
    async def run(self) -> None:
        workflow.upsert_search_attributes({"CustomerId": "c-1"})
        workflow.logger.info("tagged")


def test_upsert_search_attributes_command_matches_its_event_on_replay() -> None:
    history = HistoryBuilder("Tagging")
    history.task()
    activation = new_instance(Tagging).activate(history.events)
    assert activation.commands[0] == {
        "command_type": "UpsertWorkflowSearchAttributes",
        "attributes": {"search_attributes": {"CustomerId": "c-1"}},
    }
    wtc = history.completed()
    history.add(
        "UpsertWorkflowSearchAttributes",
        search_attributes={"CustomerId": "c-1"},
        workflow_task_completed_event_id=wtc,
    )
    history.add("WorkflowExecutionCompleted", result=None, workflow_task_completed_event_id=wtc)
    assert new_instance(Tagging).activate(history.events).commands == []


@workflow.defn(name="Patched")
class PatchDeprecated:
    @workflow.run
    async def run(self) -> str:
        workflow.deprecate_patch("v2")
        return "new"


def _patched_history(*, with_marker: bool) -> HistoryBuilder:
    history = HistoryBuilder("Patched")
    history.task()
    wtc = history.completed()
    if with_marker:
        details = {"patch_id": payload("v2"), "deprecated": payload(False)}
        history.add("MarkerRecorded", marker_name="core_patch", details=details)
    history.add("WorkflowExecutionCompleted", result=[payload("new")], workflow_task_completed_event_id=wtc)
    return history


def test_deprecated_patch_replays_histories_with_and_without_marker() -> None:
    for with_marker in (True, False):
        history = _patched_history(with_marker=with_marker)
        assert new_instance(PatchDeprecated).activate(history.events).commands == []


@workflow.defn
class AsyncSignals:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: len(self.seen) == 2)
        return self.seen

    @workflow.signal
    async def note(self, text: str) -> None:
        await asyncio.sleep(0)
        self.seen.append(text)


def test_signals_in_the_first_task_reach_async_handlers_in_history_order() -> None:
    history = HistoryBuilder("AsyncSignals")
    history.add("WorkflowExecutionSignaled", signal_name="note", input=[payload("first")])
    history.add("WorkflowExecutionSignaled", signal_name="note", input=[payload("second")])
    history.task()
    activation = new_instance(AsyncSignals).activate(history.events)
    assert activation.commands[0]["attributes"]["result"] == [payload(["first", "second"])]
