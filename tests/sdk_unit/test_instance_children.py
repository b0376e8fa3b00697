"""Child workflow and external-workflow commands against server-shaped histories (no server)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sdk import workflow
from sdk.exceptions import ChildWorkflowError, NondeterminismError
from tests.sdk_unit._history import HistoryBuilder, command_types, new_instance, payload


@workflow.defn(name="Parent")
class Parent:
    @workflow.run
    async def run(self) -> str:
        try:
            result = await workflow.execute_child_workflow("Kid", 1, id="kid-1")
        except ChildWorkflowError as err:
            return f"failed: {err.cause}"
        await workflow.get_external_workflow_handle("other").signal("poke", "hi")
        return f"kid said {result}"


@workflow.defn(name="Parent")
class ParentWithOtherChildId:
    @workflow.run
    async def run(self) -> str:
        return str(await workflow.execute_child_workflow("Kid", 1, id="kid-2"))


def _child_history(close: str, **close_attributes: Any) -> HistoryBuilder:
    history = HistoryBuilder("Parent")
    history.task()
    wtc = history.completed()
    initiated = history.add(
        "StartChildWorkflowExecutionInitiated",
        workflow_id="kid-1",
        workflow_type={"name": "Kid"},
        workflow_task_completed_event_id=wtc,
    )
    started = history.add(
        "ChildWorkflowExecutionStarted",
        initiated_event_id=initiated,
        workflow_execution={"workflow_id": "kid-1", "run_id": "r-1"},
    )
    history.task()
    history.completed()
    history.add(close, initiated_event_id=initiated, started_event_id=started, **close_attributes)
    history.task()
    return history


def test_the_first_task_starts_the_child_with_its_options() -> None:
    history = HistoryBuilder("Parent")
    history.task()
    [command] = new_instance(Parent).activate(history.events).commands
    assert command["command_type"] == "StartChildWorkflowExecution"
    attrs = command["attributes"]
    assert (attrs["workflow_id"], attrs["workflow_type"], attrs["input"]) == (
        "kid-1",
        {"name": "Kid"},
        [payload(1)],
    )
    assert attrs["parent_close_policy"] == "PARENT_CLOSE_POLICY_TERMINATE"


def test_a_completed_child_resolves_and_the_next_command_is_an_external_signal() -> None:
    history = _child_history("ChildWorkflowExecutionCompleted", result=[payload("yes")])
    activation = new_instance(Parent).activate(history.events)
    assert command_types(activation.commands) == ["SignalExternalWorkflowExecution"]
    assert activation.commands[0]["attributes"]["execution"] == {"workflow_id": "other", "run_id": ""}


def test_a_failed_child_raises_child_workflow_error_with_the_cause() -> None:
    failure = {"message": "broken", "application_failure_info": {"type": "Oops", "non_retryable": True}}
    history = _child_history("ChildWorkflowExecutionFailed", failure=failure)
    [command] = new_instance(Parent).activate(history.events).commands
    assert command["command_type"] == "CompleteWorkflowExecution"
    # An ApplicationError with a type reads "type: message", as Temporal's does.
    assert command["attributes"]["result"] == [payload("failed: Oops: broken")]


def test_replay_refuses_a_child_started_with_another_id() -> None:
    history = _child_history("ChildWorkflowExecutionCompleted", result=[payload("yes")])
    with pytest.raises(NondeterminismError, match="kid-2"):
        new_instance(ParentWithOtherChildId).activate(history.events)


@workflow.defn(name="Quitter")
class Quitter:
    """Gives up on a child that has not started yet, then waits to be told it is done."""

    def __init__(self) -> None:
        self.signals = 0
        self.outcome = "waiting"

    @workflow.run
    async def run(self) -> str:
        start = asyncio.ensure_future(workflow.start_child_workflow("Kid", id="kid-q"))
        await workflow.wait_condition(lambda: self.signals >= 1)
        start.cancel()
        try:
            await start
        except asyncio.CancelledError:
            self.outcome = "cancelled"
        await workflow.wait_condition(lambda: self.signals >= 2)
        return "gave up"

    @workflow.signal
    def nudge(self) -> None:
        self.signals += 1

    @workflow.query
    def state(self) -> str:
        return self.outcome


def test_cancelling_a_starting_child_raises_at_once_and_cancels_it_once_started() -> None:
    history = HistoryBuilder("Quitter")
    history.task()
    wtc = history.completed()
    initiated = history.add(
        "StartChildWorkflowExecutionInitiated",
        workflow_id="kid-q",
        workflow_type={"name": "Kid"},
        workflow_task_completed_event_id=wtc,
    )
    history.add("WorkflowExecutionSignaled", signal_name="nudge", input=[])
    history.task()
    instance = new_instance(Quitter)
    assert instance.activate(history.events).commands == []
    assert instance.query("state", []) == payload("cancelled")  # raised at once, without the Started event
    first_new = len(history.events)
    history.completed()
    history.add(
        "ChildWorkflowExecutionStarted",
        initiated_event_id=initiated,
        workflow_execution={"workflow_id": "kid-q", "run_id": "r-q"},
    )
    history.task()
    [command] = instance.activate(history.events[first_new:]).commands
    assert command["command_type"] == "RequestCancelExternalWorkflowExecution"
    assert command["attributes"]["execution"] == {"workflow_id": "kid-q", "run_id": "r-q"}
    assert command["attributes"]["child_workflow_only"] is True
