"""A worker may send an activity's result with the commands of the workflow task it schedules.

On the real PostgreSQL, through the kernel and the lane: the two are written in one
transaction as the two calls would have written them, with the worker's start time and
history size on ``WorkflowTaskStarted``, only if the run is where the worker saw it; any
change in between (a signal, a wrong event id, a skewed clock, a rejected command) records
the result on its own and hands the task back, and a repeated report is refused as stale.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chronicle.errors import ChronicleError, ErrorCode
from history import kernel
from history.kernel.handoff import WorkflowTaskWanted
from history.kernel.run_ahead import WorkflowTaskAhead
from history.models import HistoryEvent, WorkflowExecution
from matching.dispatch import poll_once
from tests.asgi_client import asgi_post
from tests.factories import ApiKeyFactory, ExecutionFactory, scope_of

pytestmark = pytest.mark.django_db

QUEUE, STICKY = "orders", "orders-sticky-w1"
WANTED = WorkflowTaskWanted(sticky_task_queue=STICKY, identity="w1")


def command(command_type: str, **attributes: Any) -> dict[str, Any]:
    return {"command_type": command_type, "attributes": attributes}


def schedule(activity_id: str) -> dict[str, Any]:
    return command(
        "ScheduleActivityTask", activity_id=activity_id, activity_type="Charge", start_to_close_timeout=60
    )


def _running_activity() -> tuple[WorkflowExecution, dict[str, Any], list[dict[str, Any]]]:
    """A run sticky to this worker with one activity started; the events its first
    completion recorded (as the worker asked for them)."""
    run = ExecutionFactory(task_queue=QUEUE)
    task = poll_once(run.namespace, QUEUE, "workflow", "w1")
    assert task is not None
    completed = kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[schedule("a1")],
        sticky_task_queue=STICKY,
        return_recorded_events=True,
    )
    activity = poll_once(run.namespace, QUEUE, "activity", "w1")
    assert activity is not None and completed.recorded_events is not None
    return run, activity, completed.recorded_events


def _ahead(
    recorded: list[dict[str, Any]], commands: list[dict[str, Any]], **changes: Any
) -> WorkflowTaskAhead:
    fields: dict[str, Any] = {
        "expected_event_id": recorded[-1]["event_id"] + 1,
        "started_time": datetime.now(UTC),
        "history_size_bytes": 1234,
        "commands": commands,
        "messages": [],
    }
    return WorkflowTaskAhead(**{**fields, **changes})


def _report(activity: dict[str, Any], ahead: WorkflowTaskAhead) -> kernel.ActivityReported:
    return kernel.report_activity_task_completed(
        scope=scope_of(activity),
        task_token=activity["task_token"],
        result={"charged": 5},
        identity="w1",
        wanted=WANTED,
        ahead=ahead,
    )


def _kinds(run: WorkflowExecution) -> list[str]:
    return list(
        HistoryEvent.objects.filter(run=run).order_by("event_id").values_list("event_type", flat=True)
    )


def test_a_completion_answers_with_the_events_it_recorded_from_its_completed_event_on() -> None:
    _, _, recorded = _running_activity()

    assert [e["event_type"] for e in recorded] == ["WorkflowTaskCompleted", "ActivityTaskScheduled"]
    assert [e["event_id"] for e in recorded] == [4, 5]
    assert recorded[-1]["attributes"]["activity_id"] == "a1"


def test_the_result_and_the_task_run_ahead_are_written_together_as_two_calls_would() -> None:
    run, activity, recorded = _running_activity()
    ahead = _ahead(recorded, [command("CompleteWorkflowExecution", result="done")])

    reported = _report(activity, ahead)

    assert reported.handed_back is None and reported.ahead is not None
    assert reported.ahead.closed is not None
    assert _kinds(run)[5:] == [
        "ActivityTaskStarted",
        "ActivityTaskCompleted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskCompleted",
        "WorkflowExecutionCompleted",
    ]
    started = HistoryEvent.objects.get(run=run, event_type="WorkflowTaskStarted", event_id=9)
    assert started.event_time == ahead.started_time  # what the worker's code saw as now()
    assert started.attributes["history_size_bytes"] == 1234
    assert started.attributes["identity"] == "w1"
    run.refresh_from_db()
    assert run.status == "Completed"
    assert [e["event_type"] for e in reported.ahead.recorded_events or []] == [
        "WorkflowTaskCompleted",
        "WorkflowExecutionCompleted",
    ]


def test_a_task_run_ahead_may_schedule_the_next_activity_and_keeps_the_run_sticky() -> None:
    run, activity, recorded = _running_activity()

    reported = _report(activity, _ahead(recorded, [schedule("a2")]))

    assert reported.ahead is not None
    run.refresh_from_db()
    assert (run.status, run.sticky_task_queue, run.wft_scheduled_event_id) == ("Running", STICKY, 0)
    assert [e["event_type"] for e in reported.ahead.recorded_events or []] == [
        "WorkflowTaskCompleted",
        "ActivityTaskScheduled",
    ]


def test_a_signal_in_between_refuses_the_task_and_records_the_result_alone() -> None:
    run, activity, recorded = _running_activity()
    kernel.signal_workflow_execution(
        run.namespace, workflow_id=run.workflow_id, run_id=str(run.run_id), signal_name="stop", input=[]
    )

    reported = _report(activity, _ahead(recorded, [command("CompleteWorkflowExecution", result="done")]))

    assert reported.ahead is None
    run.refresh_from_db()
    assert run.status == "Running"
    kinds = _kinds(run)
    assert kinds.count("ActivityTaskCompleted") == 1
    assert "WorkflowExecutionCompleted" not in kinds


@pytest.mark.parametrize(
    ("event_id_off", "clock_off"),
    [
        pytest.param(1, timedelta(0), id="event-id-ahead-of-the-run"),
        pytest.param(-1, timedelta(0), id="event-id-behind-the-run"),
        pytest.param(0, -timedelta(minutes=1), id="clock-behind"),
        pytest.param(0, timedelta(minutes=1), id="clock-ahead"),
    ],
)
def test_a_worker_wrong_about_the_run_gets_the_task_handed_back_instead(
    event_id_off: int, clock_off: timedelta
) -> None:
    run, activity, recorded = _running_activity()
    wrong = {
        "expected_event_id": recorded[-1]["event_id"] + 1 + event_id_off,
        "started_time": datetime.now(UTC) + clock_off,  # now: when the test runs, not when collected
    }

    reported = _report(activity, _ahead(recorded, [command("CompleteWorkflowExecution")], **wrong))

    assert reported.ahead is None and reported.handed_back is not None
    events = reported.handed_back.as_dict()["history"]["events"]
    assert [e["event_type"] for e in events][-3:] == [
        "ActivityTaskCompleted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
    ]
    run.refresh_from_db()
    assert run.status == "Running" and run.wft_started_event_id == 9


def test_a_rejected_command_rolls_the_task_back_and_records_the_result_alone() -> None:
    run, activity, recorded = _running_activity()
    # An activity id already in use by a pending activity: the command is rejected.
    duplicate = _ahead(recorded, [schedule("a1"), schedule("a1")])

    reported = _report(activity, duplicate)

    assert reported.ahead is None and reported.handed_back is not None
    kinds = _kinds(run)
    assert kinds.count("ActivityTaskCompleted") == 1 and kinds.count("ActivityTaskScheduled") == 1
    assert "WorkflowTaskCompleted" not in kinds[5:]


def test_a_repeated_report_is_refused_as_stale_and_writes_nothing() -> None:
    run, activity, recorded = _running_activity()
    ahead = _ahead(recorded, [schedule("a2")])
    _report(activity, ahead)
    before = _kinds(run)

    with pytest.raises(ChronicleError) as refused:
        _report(activity, ahead)

    assert refused.value.code == ErrorCode.STALE_TASK
    assert _kinds(run) == before


@pytest.mark.django_db(transaction=True)
def test_the_lane_takes_the_task_with_the_report_and_answers_with_its_completion() -> None:
    run, activity, recorded = _running_activity()
    key = ApiKeyFactory(namespace=run.namespace)
    url = f"/api/v1/namespaces/{run.namespace.name}/task-queues/{QUEUE}/activity-tasks/complete"
    offer = {"return_new_workflow_task": True, "sticky_task_queue": STICKY, "identity": "w1"}
    ahead = {
        "expected_event_id": recorded[-1]["event_id"] + 1,
        "started_time": datetime.now(UTC).isoformat(),
        "commands": [command("CompleteWorkflowExecution", result="done")],
    }
    for bad, field in [
        ({**ahead, "run_id": "x"}, "workflow_task_ahead"),
        ({**ahead, "started_time": "2026-12-06T10:00:00"}, "workflow_task_ahead"),
        ({**ahead, "expected_event_id": 0}, "workflow_task_ahead"),
    ]:
        refused = asgi_post(
            url,
            {"task_token": activity["task_token"], **offer, "workflow_task_ahead": bad},
            authorization=key.authorization,
        )
        assert refused.status_code == 400, refused.content
        assert field in str(refused.json()["details"])
    assert "ActivityTaskCompleted" not in _kinds(run)

    r = asgi_post(
        url,
        {"task_token": activity["task_token"], "result": 1, **offer, "workflow_task_ahead": ahead},
        authorization=key.authorization,
    )

    assert r.status_code == 200, r.content
    completion = r.json()["workflow_task_ahead"]
    assert completion["closed"]["event"]["event_type"] == "WorkflowExecutionCompleted"
    assert completion["activity_tasks"] == [] and completion["workflow_task"] is None
    run.refresh_from_db()
    assert run.status == "Completed"
