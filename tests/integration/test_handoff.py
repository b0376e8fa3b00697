"""An activity's result may hand the run's next workflow task straight back to its worker.

On the real PostgreSQL, through the kernel: the task is started in the completion's own
transaction for the worker whose sticky queue the run is on, with no task row, wake-up
or sticky timeout left behind; anything else leaves the task to the queue.
"""

from __future__ import annotations

from typing import Any

import pytest

from chronicle.errors import ChronicleError
from history import kernel
from history.kernel.handoff import WorkflowTaskWanted
from history.models import HistoryEvent, Task, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from tests.asgi_client import asgi_post
from tests.factories import ApiKeyFactory, ExecutionFactory, scope_of

pytestmark = pytest.mark.django_db

QUEUE, STICKY = "orders", "orders-sticky-w1"


def command(command_type: str, **attributes: Any) -> dict[str, Any]:
    return {"command_type": command_type, "attributes": attributes}


def _running_activity(
    sticky: str = STICKY, activities: int = 1
) -> tuple[WorkflowExecution, list[dict[str, Any]]]:
    """A run sticky to ``sticky`` whose first workflow task scheduled activities, now started."""
    run = ExecutionFactory(task_queue=QUEUE)
    task = poll_once(run.namespace, QUEUE, "workflow", "w1")
    assert task is not None
    schedule = [
        command(
            "ScheduleActivityTask", activity_id=f"a{i}", activity_type="Charge", start_to_close_timeout=60
        )
        for i in range(activities)
    ]
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=schedule, sticky_task_queue=sticky
    )
    started = [poll_once(run.namespace, QUEUE, "activity", "w1") for _ in range(activities)]
    assert all(started)
    return run, [a for a in started if a is not None]


def _workflow_task_rows(run: WorkflowExecution) -> list[str]:
    return list(Task.objects.filter(run_id=run.run_id, kind="workflow").values_list("task_queue", flat=True))


def test_the_completion_hands_the_next_workflow_task_to_the_worker_of_its_sticky_queue() -> None:
    run, [activity] = _running_activity()
    wanted = WorkflowTaskWanted(sticky_task_queue=STICKY, identity="w1")

    handed = kernel.respond_activity_task_completed(
        scope=scope_of(activity), task_token=activity["task_token"], result="ok", identity="w1", wanted=wanted
    )

    assert handed is not None
    task = handed.as_dict()
    kinds = [e["event_type"] for e in task["history"]["events"]]
    # What the worker's cached run has not seen: from its own completion on.
    assert kinds[0] == "WorkflowTaskCompleted"
    assert kinds[-4:] == [
        "ActivityTaskStarted",
        "ActivityTaskCompleted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
    ]
    assert task["history"]["events"][-1]["attributes"]["identity"] == "w1"
    assert _workflow_task_rows(run) == []
    assert not TimerTask.objects.filter(run_id=run.run_id, kind=TimerKind.STICKY_TIMEOUT).exists()
    scheduled = WorkflowExecution.objects.get(run_id=run.run_id).wft_scheduled_event_id
    timeouts = TimerTask.objects.filter(run_id=run.run_id, kind=TimerKind.WORKFLOW_TASK_TIMEOUT)
    assert timeouts.filter(scheduled_event_id=scheduled).count() == 1
    # The handed-back task completes like any other.
    close = command("CompleteWorkflowExecution", result="done")
    kernel.respond_workflow_task_completed(
        scope=kernel.TaskScope(run.namespace_id, STICKY), task_token=task["task_token"], commands=[close]
    )
    assert WorkflowExecution.objects.get(run_id=run.run_id).status == "Completed"


def test_a_worker_of_another_sticky_queue_gets_nothing_and_the_task_stays_queued() -> None:
    run, [activity] = _running_activity()
    wanted = WorkflowTaskWanted(sticky_task_queue="orders-sticky-w2", identity="w2")

    handed = kernel.respond_activity_task_completed(
        scope=scope_of(activity), task_token=activity["task_token"], result="ok", wanted=wanted
    )

    assert handed is None
    assert _workflow_task_rows(run) == [STICKY]
    task = poll_once(run.namespace, STICKY, "workflow", "w1")
    assert task is not None and task["history"]["events"][-1]["event_type"] == "WorkflowTaskStarted"


def test_a_result_that_meets_a_running_workflow_task_is_buffered_and_nothing_is_handed() -> None:
    run, [first, second] = _running_activity(activities=2)
    kernel.respond_activity_task_completed(scope=scope_of(first), task_token=first["task_token"], result=1)
    in_flight = poll_once(run.namespace, STICKY, "workflow", "w1")
    assert in_flight is not None
    events = HistoryEvent.objects.filter(run=run).count()
    wanted = WorkflowTaskWanted(sticky_task_queue=STICKY, identity="w1")

    handed = kernel.respond_activity_task_completed(
        scope=scope_of(second), task_token=second["task_token"], result=2, wanted=wanted
    )

    assert handed is None
    assert HistoryEvent.objects.filter(run=run).count() == events  # buffered behind the running task
    assert (
        WorkflowExecution.objects.get(run_id=run.run_id).wft_started_event_id == in_flight["started_event_id"]
    )


def test_a_retried_failure_schedules_no_workflow_task_so_hands_none() -> None:
    run = ExecutionFactory(task_queue=QUEUE)
    task = poll_once(run.namespace, QUEUE, "workflow", "w1")
    assert task is not None
    retry = {"initial_interval": 30, "maximum_attempts": 3}
    schedule = command(
        "ScheduleActivityTask",
        activity_id="a",
        activity_type="Charge",
        start_to_close_timeout=60,
        retry_policy=retry,
    )
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[schedule], sticky_task_queue=STICKY
    )
    activity = poll_once(run.namespace, QUEUE, "activity", "w1")
    assert activity is not None
    wanted = WorkflowTaskWanted(sticky_task_queue=STICKY, identity="w1")

    handed = kernel.respond_activity_task_failed(
        scope=scope_of(activity),
        task_token=activity["task_token"],
        failure={"message": "flaky"},
        wanted=wanted,
    )

    assert handed is None
    assert WorkflowExecution.objects.get(run_id=run.run_id).wft_scheduled_event_id == 0


def test_a_duplicate_completion_is_refused_and_hands_nothing_twice() -> None:
    run, [activity] = _running_activity()
    wanted = WorkflowTaskWanted(sticky_task_queue=STICKY, identity="w1")
    scope = scope_of(activity)
    assert kernel.respond_activity_task_completed(
        scope=scope, task_token=activity["task_token"], result="ok", wanted=wanted
    )
    events = HistoryEvent.objects.filter(run=run).count()

    with pytest.raises(ChronicleError) as refused:
        kernel.respond_activity_task_completed(
            scope=scope, task_token=activity["task_token"], result="ok", wanted=wanted
        )

    assert (refused.value.status, refused.value.code) == (404, "stale_task_token")
    assert HistoryEvent.objects.filter(run=run).count() == events


@pytest.mark.django_db(transaction=True)
def test_the_lane_takes_the_offer_with_the_report_and_answers_with_the_task() -> None:
    run, [activity] = _running_activity()
    key = ApiKeyFactory(namespace=run.namespace)
    url = f"/api/v1/namespaces/{run.namespace.name}/task-queues/{QUEUE}/activity-tasks/complete"
    offer = {"return_new_workflow_task": True, "sticky_task_queue": STICKY, "identity": "w1"}

    too_long = asgi_post(
        url,
        {"task_token": activity["task_token"], **offer, "sticky_task_queue": "q" * 1001},
        authorization=key.authorization,
    )
    assert too_long.status_code == 400
    assert too_long.json()["details"]["fields"] == {
        "sticky_task_queue": ["Ensure this field has no more than 1000 characters."]
    }
    r = asgi_post(
        url, {"task_token": activity["task_token"], "result": 1, **offer}, authorization=key.authorization
    )

    assert r.status_code == 200, r.content
    task = r.json()["workflow_task"]
    assert task["workflow_execution"]["run_id"] == str(run.run_id)
    assert task["history"]["events"][-1]["attributes"]["request_id"] == "handed-back"
    assert _workflow_task_rows(run) == []


@pytest.mark.django_db(transaction=True)
def test_a_report_without_an_offer_answers_as_before() -> None:
    run, [activity] = _running_activity()
    key = ApiKeyFactory(namespace=run.namespace)
    url = f"/api/v1/namespaces/{run.namespace.name}/task-queues/{QUEUE}/activity-tasks/complete"

    r = asgi_post(url, {"task_token": activity["task_token"], "result": 1}, authorization=key.authorization)

    assert (r.status_code, r.json()) == (200, {})
    assert _workflow_task_rows(run) == [STICKY]
