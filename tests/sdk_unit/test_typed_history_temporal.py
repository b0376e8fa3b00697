"""A history exported from Temporal (``temporal workflow show --output json``) read by
``WorkflowHistory.from_json`` and replayed against the ported workflow code."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import timedelta
from typing import Any

import pytest

from sdk import activity, workflow
from sdk._runtime.replayer import Replayer, WorkflowHistory
from sdk.api.enums.v1 import EventType
from sdk.exceptions import ActivityError, ApplicationError

RUN_ID = "0193d1f2-7c3e-7a41-9b7e-3f4a5b6c7d8e"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _json_payload(value: Any) -> dict[str, Any]:
    """A payload as Temporal's JSON export writes it: metadata and data in base64."""
    return {"metadata": {"encoding": _b64(b"json/plain")}, "data": _b64(json.dumps(value).encode())}


def _payloads(*values: Any) -> dict[str, Any]:
    return {"payloads": [_json_payload(v) for v in values]}


class _Export:
    """Builds the JSON a Temporal CLI export prints, event by event."""

    def __init__(self, *, short_event_types: bool = False) -> None:
        self.events: list[dict[str, Any]] = []
        self.second = 0
        self.short = short_event_types

    def add(self, kind: str, attributes: dict[str, Any], *, advance: int = 0) -> str:
        self.second += advance
        event_id = str(len(self.events) + 1)
        camel = "".join(word.capitalize() for word in kind.split("_"))
        self.events.append(
            {
                "eventId": event_id,
                "eventTime": f"2026-03-01T10:00:{self.second:02d}.123456789Z",
                "eventType": camel if self.short else f"EVENT_TYPE_{kind}",
                "taskId": "1048601",
                camel[0].lower() + camel[1:] + "EventAttributes": attributes,
            }
        )
        return event_id

    def workflow_task(self, *, advance: int = 0) -> str:
        scheduled = self.add(
            "WORKFLOW_TASK_SCHEDULED",
            {
                "taskQueue": {"name": "hello-queue", "kind": "TASK_QUEUE_KIND_NORMAL"},
                "startToCloseTimeout": "10s",
                "attempt": 1,
            },
            advance=advance,
        )
        started = self.add(
            "WORKFLOW_TASK_STARTED",
            {"scheduledEventId": scheduled, "identity": "1234@host", "historySizeBytes": "512"},
        )
        return self.add(
            "WORKFLOW_TASK_COMPLETED",
            {"scheduledEventId": scheduled, "startedEventId": started, "identity": "1234@host"},
        )

    def json(self) -> str:
        return json.dumps({"events": self.events}, indent=2)


def greeting_export(*, short_event_types: bool = False) -> str:
    """A run of ``GreetingWorkflow("World")`` as Temporal recorded it: an activity, a signal,
    a 5 s timer, completion. Temporal numbered the activity and the timer each from 1."""
    h = _Export(short_event_types=short_event_types)
    h.add(
        "WORKFLOW_EXECUTION_STARTED",
        {
            "workflowType": {"name": "GreetingWorkflow"},
            "taskQueue": {"name": "hello-queue", "kind": "TASK_QUEUE_KIND_NORMAL"},
            "input": _payloads("World"),
            "workflowExecutionTimeout": "0s",
            "workflowRunTimeout": "0s",
            "workflowTaskTimeout": "10s",
            "originalExecutionRunId": RUN_ID,
            "firstExecutionRunId": RUN_ID,
            "identity": "1234@host",
            "attempt": 1,
            "header": {"fields": {}},
            "memo": {"fields": {"owner": _json_payload("ops")}},
        },
    )
    first_task = h.workflow_task()
    scheduled = h.add(
        "ACTIVITY_TASK_SCHEDULED",
        {
            "activityId": "1",
            "activityType": {"name": "compose_greeting"},
            "taskQueue": {"name": "hello-queue", "kind": "TASK_QUEUE_KIND_NORMAL"},
            "header": {},
            "input": _payloads("World"),
            "scheduleToCloseTimeout": "0s",
            "scheduleToStartTimeout": "0s",
            "startToCloseTimeout": "10s",
            "heartbeatTimeout": "0s",
            "workflowTaskCompletedEventId": first_task,
            "retryPolicy": {"initialInterval": "1s", "backoffCoefficient": 2, "maximumInterval": "100s"},
        },
    )
    started = h.add("ACTIVITY_TASK_STARTED", {"scheduledEventId": scheduled, "attempt": 1}, advance=1)
    h.add(
        "ACTIVITY_TASK_COMPLETED",
        {"result": _payloads("Hello, World"), "scheduledEventId": scheduled, "startedEventId": started},
    )
    h.workflow_task()
    h.add("WORKFLOW_EXECUTION_SIGNALED", {"signalName": "punctuate", "input": _payloads("!")}, advance=2)
    timer_task = h.workflow_task()
    timer = h.add(
        "TIMER_STARTED",
        {"timerId": "1", "startToFireTimeout": "5s", "workflowTaskCompletedEventId": timer_task},
    )
    h.add("TIMER_FIRED", {"timerId": "1", "startedEventId": timer}, advance=5)
    last_task = h.workflow_task()
    h.add(
        "WORKFLOW_EXECUTION_COMPLETED",
        {"result": _payloads("Hello, World!"), "workflowTaskCompletedEventId": last_task},
    )
    return h.json()


@activity.defn
async def compose_greeting(name: str) -> str:
    return f"Hello, {name}"


@workflow.defn
class GreetingWorkflow:
    """The workflow as ported: ``temporalio`` imports swapped for ``sdk``, nothing else."""

    def __init__(self) -> None:
        self.mark = ""

    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(
            compose_greeting, name, start_to_close_timeout=timedelta(seconds=10)
        )
        await workflow.wait_condition(lambda: bool(self.mark))
        await workflow.sleep(timedelta(seconds=5))
        return greeting + self.mark

    @workflow.signal
    def punctuate(self, mark: str) -> None:
        self.mark = mark


@workflow.defn(name="GreetingWorkflow")
class GreetingWorkflowSleepsFirst(GreetingWorkflow):
    """A changed version: its timer comes before the activity the history recorded."""

    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(timedelta(seconds=5))
        return await super().run(name)


def test_a_temporal_export_reads_as_chronicle_events() -> None:
    history = WorkflowHistory.from_json("greeting-wf", greeting_export())
    assert (history.workflow_id, history.run_id) == ("greeting-wf", RUN_ID)
    started = history.events[0]
    assert started.event_type is EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    assert started["event_type"] == "WorkflowExecutionStarted"
    assert started.event_id == 1
    assert started.event_time.microsecond == 123456
    attrs = started.workflow_execution_started_event_attributes
    assert attrs.input == [{"metadata": {"encoding": "json/plain"}, "data": "World"}]
    assert attrs.workflow_task_timeout == timedelta(seconds=10)
    assert attrs["memo"] == {"owner": {"metadata": {"encoding": "json/plain"}, "data": "ops"}}
    scheduled = history.events[4].activity_task_scheduled_event_attributes
    assert scheduled.workflow_task_completed_event_id == 4
    assert scheduled.retry_policy.maximum_interval == timedelta(seconds=100)
    started_task = history.events[2].attributes
    assert started_task["history_size_bytes"] == 512
    # Temporal's per-kind ids become Chronicle's one command sequence: activity 1, timer 2.
    timer = next(e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED)
    fired = next(e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED)
    assert timer.timer_started_event_attributes.timer_id == "2"
    assert fired.timer_fired_event_attributes.timer_id == "2"
    # Once read, it round-trips as Chronicle's JSON.
    assert WorkflowHistory.from_json(history.to_json()) == history


def test_a_temporal_history_replays_against_the_ported_workflow() -> None:
    replayer = Replayer(workflows=[GreetingWorkflow])
    for export in (greeting_export(), greeting_export(short_event_types=True)):
        history = WorkflowHistory.from_json("greeting-wf", export)
        result = asyncio.run(_replay(replayer, history))
        assert result is None


def test_a_changed_workflow_fails_replay_with_temporals_error_type() -> None:
    history = WorkflowHistory.from_json("greeting-wf", greeting_export())
    replayer = Replayer(workflows=[GreetingWorkflowSleepsFirst])
    with pytest.raises(workflow.NondeterminismError, match="timer"):
        asyncio.run(_replay(replayer, history))
    results = asyncio.run(replayer.replay_workflows([history], raise_on_replay_failure=False))
    assert isinstance(results.replay_failures[RUN_ID], workflow.NondeterminismError)


async def _replay(replayer: Replayer, history: WorkflowHistory) -> Exception | None:
    return (await replayer.replay_workflow(history)).replay_failure


def test_other_payload_encodings_keep_their_bytes() -> None:
    h = _Export()
    h.add(
        "WORKFLOW_EXECUTION_STARTED",
        {
            "workflowType": {"name": "Bytes"},
            "taskQueue": {"name": "q"},
            "input": {
                "payloads": [
                    {"metadata": {"encoding": _b64(b"binary/plain")}, "data": _b64(b"\x00\x01raw")},
                    {"metadata": {"encoding": _b64(b"binary/null")}},
                ]
            },
        },
    )
    [started] = WorkflowHistory.from_json("wf", h.json()).events
    plain, null = started.workflow_execution_started_event_attributes.input
    assert plain == {"metadata": {"encoding": "binary/plain"}, "data": _b64(b"\x00\x01raw")}
    assert null["metadata"] == {"encoding": "binary/null"}


def test_a_bare_event_list_and_offset_times_are_read() -> None:
    events = json.loads(greeting_export())["events"]
    events[0]["eventTime"] = "2026-03-01T11:00:00.5+01:00"
    events[1]["eventTime"] = "2026-03-01T10:00:00Z"
    history = WorkflowHistory.from_json("greeting-wf", json.dumps(events))
    assert len(history.events) == 20
    assert history.events[0]["event_time"] == "2026-03-01T10:00:00.500000+00:00"
    assert history.events[1]["event_time"] == "2026-03-01T10:00:00+00:00"
    assert Replayer(workflows=[GreetingWorkflow]).replay_workflow(history).replay_failure is None
    # Chronicle's own events as a bare list read too.
    assert WorkflowHistory.from_json(history.to_json_dict()["events"]).events == history.events
    events[2]["eventTime"] = "yesterday"
    with pytest.raises(ValueError, match="unreadable eventTime"):
        WorkflowHistory.from_json("greeting-wf", json.dumps(events))


@activity.defn
async def charge(amount: int) -> str:
    raise NotImplementedError  # replay never runs activities


@workflow.defn
class ChargeWorkflow:
    """Catches its activity's failure, as Temporal samples do. It completes, as the history
    recorded, only if the error is what Temporal's SDK gave; otherwise it starts a timer, which
    the history does not have, and the replay fails."""

    @workflow.run
    async def run(self, amount: int) -> str:
        try:
            return await workflow.execute_activity(
                charge, amount, start_to_close_timeout=timedelta(seconds=5)
            )
        except ActivityError as err:
            cause = err.cause
            if (
                isinstance(cause, ApplicationError)
                and (cause.type, list(cause.details), cause.non_retryable) == ("CardDeclined", ["4000"], True)
                and cause.message == "card declined"
            ):
                return "declined"
            await workflow.sleep(1)
            return "unexpected"


def test_an_activity_failure_from_temporal_reaches_the_workflow_as_temporals_errors() -> None:
    h = _Export()
    h.add(
        "WORKFLOW_EXECUTION_STARTED",
        {
            "workflowType": {"name": "ChargeWorkflow"},
            "taskQueue": {"name": "q"},
            "input": _payloads(42),
            "originalExecutionRunId": RUN_ID,
            "attempt": 1,
        },
    )
    task = h.workflow_task()
    scheduled = h.add(
        "ACTIVITY_TASK_SCHEDULED",
        {
            "activityId": "1",
            "activityType": {"name": "charge"},
            "input": _payloads(42),
            "startToCloseTimeout": "5s",
            "workflowTaskCompletedEventId": task,
        },
    )
    started = h.add("ACTIVITY_TASK_STARTED", {"scheduledEventId": scheduled, "attempt": 3})
    failure = {
        "message": "card declined",
        "source": "PythonSDK",
        "stackTrace": '  File "charge.py", line 3',
        "applicationFailureInfo": {
            "type": "CardDeclined",
            "nonRetryable": True,
            "details": _payloads("4000"),
        },
    }
    h.add(
        "ACTIVITY_TASK_FAILED",
        {
            "failure": failure,
            "scheduledEventId": scheduled,
            "startedEventId": started,
            "retryState": "RETRY_STATE_NON_RETRYABLE_FAILURE",
        },
    )
    last = h.workflow_task()
    h.add(
        "WORKFLOW_EXECUTION_COMPLETED",
        {"result": _payloads("declined"), "workflowTaskCompletedEventId": last},
    )
    history = WorkflowHistory.from_json("charge-wf", h.json())
    failed = next(e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED)
    typed = failed.activity_task_failed_event_attributes.failure
    assert typed is not None and typed.message == "card declined" and typed.stack_trace.startswith("  File")
    assert typed.application_failure_info["non_retryable"] is True
    assert Replayer(workflows=[ChargeWorkflow]).replay_workflow(history).replay_failure is None
    # The same history with another error type takes the workflow down the other branch.
    other = WorkflowHistory.from_json("charge-wf", h.json().replace("CardDeclined", "Timeout"))
    with pytest.raises(workflow.NondeterminismError, match="StartTimer"):
        Replayer(workflows=[ChargeWorkflow]).replay_workflow(other)
