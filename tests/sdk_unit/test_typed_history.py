"""Typed history: ``HistoryEvent`` and ``EventType`` over the server's JSON, the JSON round trip,
and the awaitable ``Replayer`` (Temporal's ``replay_workflow`` / ``replay_workflows``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sdk._runtime.replayer import Replayer, WorkflowHistory, WorkflowReplayResult
from sdk.api.enums.v1 import EventType
from sdk.api.failure.v1 import Failure
from sdk.api.history.v1 import (
    ActivityTaskScheduledEventAttributes,
    HistoryEvent,
    Message,
    WorkflowExecutionStartedEventAttributes,
)
from sdk.worker import UnsandboxedWorkflowRunner
from sdk.workflow import NondeterminismError
from tests.sdk_unit.test_replayer import ApprovalWithExtraTimer, RecordedApproval

RECORDED = Path(__file__).parent / "histories" / "approval_recorded.json"


def _recorded() -> WorkflowHistory:
    return WorkflowHistory.from_json(RECORDED.read_text())


def test_event_type_has_temporals_names_and_numbers() -> None:
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED == 1
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED == 10
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED == 41
    assert EventType.Name(18) == "EVENT_TYPE_TIMER_FIRED"
    assert EventType.Value("EVENT_TYPE_TIMER_FIRED") == 18
    for member in EventType:
        assert EventType.from_name(member.short_name) is member
        assert EventType.from_name(member.name) is member
    continued = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert continued.short_name == "WorkflowExecutionContinuedAsNew"
    assert EventType.EVENT_TYPE_TIMER_FIRED.attributes_field == "timer_fired_event_attributes"
    with pytest.raises(ValueError, match="unknown history event type"):
        EventType.from_name("TimerExploded")


def test_history_events_are_typed() -> None:
    history = _recorded()
    started, *_ = history.events
    assert isinstance(started, HistoryEvent)
    assert started.event_type is EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    assert started.event_id == 1
    assert started.event_time == datetime(2026, 12, 3, 11, 51, 36, 537384, tzinfo=UTC)
    naive_utc = started.event_time.ToDatetime()  # protobuf's Timestamp method: naive UTC
    assert naive_utc.tzinfo is None and naive_utc.replace(tzinfo=UTC) == started.event_time
    attrs = started.workflow_execution_started_event_attributes
    assert isinstance(attrs, WorkflowExecutionStartedEventAttributes)
    assert attrs.workflow_type.name == "Approval"
    assert attrs.task_queue.name == "q-b4b781e7"
    assert attrs.input == [{"metadata": {"encoding": "json/plain"}, "data": "ada"}]
    assert attrs.workflow_task_timeout == timedelta(seconds=10)
    assert attrs.original_execution_run_id == history.run_id
    assert started.HasField("workflow_execution_started_event_attributes")
    assert not started.HasField("timer_fired_event_attributes")
    assert started.WhichOneof("attributes") == "workflow_execution_started_event_attributes"
    # Another type's attributes are empty, as an unset protobuf field is.
    assert started.timer_fired_event_attributes == {}
    with pytest.raises(AttributeError):
        _ = started.no_such_thing

    kind = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    scheduled = next(e for e in history.events if e.event_type == kind)
    sched = scheduled.activity_task_scheduled_event_attributes
    assert isinstance(sched, ActivityTaskScheduledEventAttributes)
    assert (sched.activity_id, sched.activity_type.name) == ("1", "Greet")
    assert sched.start_to_close_timeout == timedelta(seconds=10)
    assert sched.start_to_close_timeout.ToSeconds() == 10
    assert sched.workflow_task_completed_event_id == 4
    # The generic accessor types fields by what they are, on any event.
    assert scheduled.attributes.retry_policy.maximum_interval == timedelta(seconds=100)
    assert scheduled.attributes.retry_policy.HasField("backoff_coefficient")
    with pytest.raises(AttributeError, match="no field 'nope'"):
        _ = scheduled.attributes.nope


def test_events_stay_the_servers_json() -> None:
    history = _recorded()
    raw = json.loads(RECORDED.read_text())
    # Indexing reads the JSON as written; the events compare equal to it and serialise as it.
    assert [e["event_type"] for e in history.events] == [e["event_type"] for e in raw["events"]]
    assert history.events == raw["events"]
    assert json.loads(history.to_json()) == raw
    assert history.to_json_dict()["events"][0] == raw["events"][0]
    assert WorkflowHistory.from_json(history.to_json()) == history
    # Temporal's argument order: from_json(workflow_id, history).
    again = WorkflowHistory.from_json("wf-other", history.to_json_dict())
    assert again.events == history.events


def test_failures_in_attributes_are_typed() -> None:
    event = HistoryEvent(
        event_id=9,
        event_type="ActivityTaskFailed",
        event_time="2026-01-01T00:00:00+00:00",
        attributes={
            "scheduled_event_id": 5,
            "failure": {"message": "boom", "stack_trace": "at x", "application_failure_info": {"type": "E"}},
        },
    )
    failure = event.activity_task_failed_event_attributes.failure
    assert isinstance(failure, Failure)
    assert (failure.message, failure.stack_trace) == ("boom", "at x")
    assert failure.application_failure_info == {"type": "E"}
    assert isinstance(event.attributes, Message)
    with pytest.raises(ValueError, match="unknown history event type"):
        HistoryEvent(event_id=1, event_type="Nonsense", event_time="2026-01-01T00:00:00+00:00")


def test_replay_workflow_is_awaitable_and_still_readable_directly() -> None:
    history = _recorded()
    replayer = Replayer(workflows=[RecordedApproval])

    async def awaited() -> WorkflowReplayResult:
        return await replayer.replay_workflow(history)

    assert asyncio.run(awaited()).replay_failure is None
    assert replayer.replay_workflow(history).replay_failure is None


def test_replay_workflow_raises_nondeterminism_or_reports_it() -> None:
    history = _recorded()
    replayer = Replayer(workflows=[ApprovalWithExtraTimer])

    async def scenario() -> WorkflowReplayResult:
        with pytest.raises(NondeterminismError, match="StartTimer"):
            await replayer.replay_workflow(history)
        return await replayer.replay_workflow(history, raise_on_replay_failure=False)

    assert isinstance(asyncio.run(scenario()).replay_failure, NondeterminismError)


def test_replay_workflows_takes_an_async_iterator_and_reports_failures_by_run() -> None:
    good, bad = _recorded(), _recorded()
    bad.run_id = "run-bad"

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for history in (good, bad):
            yield history

    replayer = Replayer(workflows=[RecordedApproval])
    results = asyncio.run(replayer.replay_workflows(histories(), raise_on_replay_failure=False))
    assert results.replay_failures == {}

    changed = Replayer(workflows=[ApprovalWithExtraTimer])
    results = asyncio.run(changed.replay_workflows([good, bad], raise_on_replay_failure=False))
    assert sorted(results.replay_failures) == sorted([good.run_id, "run-bad"])
    assert all(isinstance(e, NondeterminismError) for e in results.replay_failures.values())
    with pytest.raises(NondeterminismError):
        asyncio.run(changed.replay_workflows([good]))


def test_workflow_replay_iterator_yields_each_result() -> None:
    async def scenario() -> list[Exception | None]:
        replayer = Replayer(workflows=[ApprovalWithExtraTimer])
        async with replayer.workflow_replay_iterator([_recorded(), _recorded()]) as results:
            return [result.replay_failure async for result in results]

    failures = asyncio.run(scenario())
    assert len(failures) == 2 and all(isinstance(f, NondeterminismError) for f in failures)


def test_an_unregistered_workflow_type_is_named() -> None:
    with pytest.raises(ValueError, match="'Approval' is not registered"):
        Replayer(workflows=[]).replay_workflow(_recorded())


def test_replayer_accepts_temporals_options_and_refuses_misspellings() -> None:
    replayer = Replayer(
        workflows=[RecordedApproval],
        workflow_runner=UnsandboxedWorkflowRunner(),
        workflow_failure_exception_types=[Exception],
        debug_mode=True,
    )
    assert replayer.namespace == "ReplayNamespace"  # Temporal's default
    assert replayer.replay_workflow(_recorded()).replay_failure is None
    with pytest.raises(TypeError, match="workflow_runer"):
        Replayer(workflows=[RecordedApproval], workflow_runer=None)
