"""Local activities, activity cancellation, continue-as-new and typed arguments."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

import pytest

from sdk import workflow
from sdk._runtime.instance import LocalActivityResult, StaleInstanceError
from sdk.exceptions import ActivityError
from sdk.exceptions import TimeoutError as TimeoutFailure
from tests.sdk_unit._history import HistoryBuilder, command_types, new_instance, payload


@workflow.defn
class Local:
    @workflow.run
    async def run(self) -> int:
        value = await workflow.execute_local_activity(
            "double", 21, start_to_close_timeout=timedelta(seconds=1)
        )
        return int(value)


def test_local_activity_runs_in_worker_and_replays_from_marker() -> None:
    history = HistoryBuilder("Local")
    history.task()
    instance = new_instance(Local)
    activation = instance.activate(history.events)
    assert activation.commands == []
    request = activation.local_activities[0]
    assert (request.activity_type, request.args) == ("double", [payload(21)])
    activation = instance.resolve_local_activity(request.seq, LocalActivityResult(payload(42)))
    assert command_types(activation.commands) == ["RecordMarker", "CompleteWorkflowExecution"]
    marker = activation.commands[0]["attributes"]
    assert marker["marker_name"] == "LocalActivity" and marker["details"]["result"] == payload(42)
    # Replay: the recorded marker answers; the worker is not asked to run it again.
    wtc = history.completed()
    history.add("MarkerRecorded", **marker, workflow_task_completed_event_id=wtc)
    history.add("WorkflowExecutionCompleted", result=[payload(42)], workflow_task_completed_event_id=wtc)
    replayed = new_instance(Local).activate(history.events)
    assert replayed.commands == [] and replayed.local_activities == []


@workflow.defn
class CancelActivity:
    @workflow.run
    async def run(self) -> str:
        task = workflow.start_activity("slow", start_to_close_timeout=timedelta(seconds=60))
        await workflow.sleep(1)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "finished"


def test_activity_cancel_after_scheduling_requests_cancellation() -> None:
    history = HistoryBuilder("CancelActivity")
    history.task()
    instance = new_instance(CancelActivity)
    assert command_types(instance.activate(history.events).commands) == [
        "ScheduleActivityTask",
        "StartTimer",
    ]
    first_new = len(history.events)
    wtc = history.completed()
    scheduled = history.activity_scheduled("slow", "1", wtc)
    timer = history.timer("2", 1.0, wtc)
    history.add("TimerFired", timer_id="2", started_event_id=timer)
    history.task(advance=1)
    activation = instance.activate(history.events[first_new:])
    assert activation.commands == [
        {"command_type": "RequestCancelActivityTask", "attributes": {"scheduled_event_id": scheduled}},
        {"command_type": "CompleteWorkflowExecution", "attributes": {"result": [payload("cancelled")]}},
    ]


@workflow.defn
class CancelBeforeSent:
    @workflow.run
    async def run(self) -> str:
        task = workflow.start_activity("slow", start_to_close_timeout=timedelta(seconds=60))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return "withdrawn"


def test_activity_cancelled_in_same_task_is_never_sent() -> None:
    history = HistoryBuilder("CancelBeforeSent")
    history.task()
    activation = new_instance(CancelBeforeSent).activate(history.events)
    assert command_types(activation.commands) == ["CompleteWorkflowExecution"]


@dataclass
class Counter:
    count: int


@workflow.defn
class Looping:
    @workflow.run
    async def run(self, state: Counter) -> None:
        assert isinstance(state, Counter)
        workflow.continue_as_new(Counter(state.count + 1))


def test_continue_as_new_with_dataclass_argument() -> None:
    history = HistoryBuilder("Looping", {"count": 1})
    history.task()
    activation = new_instance(Looping).activate(history.events)
    assert activation.completed
    assert activation.commands == [
        {
            "command_type": "ContinueAsNewWorkflowExecution",
            "attributes": {
                "workflow_type": {"name": "Looping"},
                "task_queue": {"name": "q"},
                "input": [payload({"count": 2})],
                "workflow_run_timeout": None,
                "workflow_task_timeout": None,
                "backoff_start_interval": None,
                "memo": {},
                "search_attributes": {},
                "retry_policy": None,
            },
        }
    ]


@workflow.defn
class Deterministic:
    @workflow.run
    async def run(self) -> list[str]:
        return [str(workflow.uuid4()), str(workflow.random().randint(0, 10**9)), str(workflow.now())]


def test_random_uuid_and_now_repeat_on_replay() -> None:
    history = HistoryBuilder("Deterministic")
    history.task()
    first = new_instance(Deterministic).activate(history.events).commands
    second = new_instance(Deterministic).activate(history.events).commands
    assert first == second
    assert first[0]["attributes"]["result"][0]["data"][2] == "2026-01-01 00:00:00+00:00"


@workflow.defn
class Charge:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity("charge", start_to_close_timeout=timedelta(seconds=5))


def test_failed_activity_fails_workflow_with_activity_failure_and_cause() -> None:
    history = HistoryBuilder("Charge")
    history.task()
    wtc = history.completed()
    scheduled = history.activity_scheduled("charge", "1", wtc)
    history.add(
        "ActivityTaskFailed",
        scheduled_event_id=scheduled,
        started_event_id=scheduled + 1,
        failure={"message": "declined", "application_failure_info": {"type": "Declined"}},
        retry_state="RETRY_STATE_NON_RETRYABLE_FAILURE",
    )
    history.task()
    activation = new_instance(Charge).activate(history.events)
    failure = activation.commands[0]["attributes"]["failure"]
    assert activation.commands[0]["command_type"] == "FailWorkflowExecution"
    assert failure["activity_failure_info"]["activity_type"] == "charge"
    assert failure["cause"]["application_failure_info"]["type"] == "Declined"


def test_cached_instance_refuses_events_that_skip_its_commands() -> None:
    history = HistoryBuilder("Charge")
    history.task()
    instance = new_instance(Charge)
    instance.activate(history.events)
    first_new = len(history.events)
    history.add("WorkflowTaskTimedOut", scheduled_event_id=2, started_event_id=3)
    history.task()
    with pytest.raises(StaleInstanceError):
        instance.activate(history.events[first_new:])
    assert command_types(new_instance(Charge).activate(history.events).commands) == ["ScheduleActivityTask"]


@workflow.defn
class Waiting:
    def __init__(self) -> None:
        self.cancelled = False

    @workflow.run
    async def run(self) -> str:
        task = workflow.start_activity(
            "slow",
            start_to_close_timeout=timedelta(seconds=60),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=3)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            workflow.logger.info("activity cancellation confirmed")
            return f"timed out at {workflow.info().history_length}"
        return "done"


def test_wait_for_timeout_then_wait_cancellation_completed() -> None:
    history = HistoryBuilder("Waiting")
    history.task()
    instance = new_instance(Waiting)
    assert command_types(instance.activate(history.events).commands) == [
        "ScheduleActivityTask",
        "StartTimer",
    ]
    first_new = len(history.events)
    wtc = history.completed()
    scheduled = history.activity_scheduled("slow", "1", wtc)
    timer = history.timer("2", 3.0, wtc)
    history.add("TimerFired", timer_id="2", started_event_id=timer)
    history.task(advance=3)
    activation = instance.activate(history.events[first_new:])
    assert command_types(activation.commands) == ["RequestCancelActivityTask"]
    first_new = len(history.events)
    wtc = history.completed()
    history.add(
        "ActivityTaskCancelRequested", scheduled_event_id=scheduled, workflow_task_completed_event_id=wtc
    )
    history.add("ActivityTaskCanceled", scheduled_event_id=scheduled, started_event_id=0)
    history.task()
    activation = instance.activate(history.events[first_new:])
    last = len(history.events)
    assert activation.commands == [
        {
            "command_type": "CompleteWorkflowExecution",
            "attributes": {"result": [payload(f"timed out at {last}")]},
        }
    ]


@workflow.defn
class Napper:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(timedelta(seconds=5))
        return "rested"


def test_a_cancel_that_arrives_with_the_first_task_cancels_the_run() -> None:
    # A cron run or a delayed start can be cancelled before its first workflow task.
    history = HistoryBuilder("Napper")
    history.add("WorkflowExecutionCancelRequested", cause="")
    history.task()
    activation = new_instance(Napper).activate(history.events)
    assert command_types(activation.commands) == ["CancelWorkflowExecution"]


@workflow.defn
class CatchesTimeout:
    @workflow.run
    async def run(self) -> list[str]:
        try:
            await workflow.execute_activity("charge", start_to_close_timeout=timedelta(seconds=1))
        except ActivityError as err:
            cause = err.__cause__
            kind = cause.type.name if isinstance(cause, TimeoutFailure) and cause.type else "none"
            return [err.retry_state.name if err.retry_state else "none", kind]
        return []


@pytest.mark.parametrize("recorded", ["START_TO_CLOSE", "TIMEOUT_TYPE_START_TO_CLOSE"])
def test_a_timed_out_activity_tells_its_retry_state_and_timeout_type(recorded: str) -> None:
    """The workflow sees what the history recorded: why retries stopped and which timeout
    fired, with the timeout type bare (as the history stores it) or prefixed (Temporal's JSON)."""
    history = HistoryBuilder("CatchesTimeout")
    history.task()
    scheduled = history.activity_scheduled("charge", "1", history.completed())
    history.add(
        "ActivityTaskTimedOut",
        scheduled_event_id=scheduled,
        started_event_id=scheduled + 1,
        failure={"message": "timed out", "timeout_failure_info": {"timeout_type": recorded}},
        retry_state="RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED",
    )
    history.task()
    command = new_instance(CatchesTimeout).activate(history.events).commands[0]
    assert command["command_type"] == "CompleteWorkflowExecution"
    assert command["attributes"]["result"][0]["data"] == ["MAXIMUM_ATTEMPTS_REACHED", "START_TO_CLOSE"]
