"""Reset points the kernel resolves and lists: quick picks, builds and the point summaries."""

from __future__ import annotations

from typing import Any

import pytest

from chronicle.errors import ChronicleError
from history import kernel
from history.kernel.reset import BuildIdPoint, builds_seen, reset_points, resolve_reset_point
from history.kernel.versioning import WorkerVersionStamp
from history.models import HistoryEvent, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.factories import ExecutionFactory, NamespaceFactory, scope_of

pytestmark = pytest.mark.django_db


def activity(activity_id: str, activity_type: str, **extra: Any) -> dict[str, Any]:
    attributes = {"activity_id": activity_id, "activity_type": activity_type, "start_to_close_timeout": 5}
    return {"command_type": "ScheduleActivityTask", "attributes": {**attributes, **extra}}


def complete_workflow_task(namespace: Namespace, build_id: str, *commands: dict[str, Any]) -> None:
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=list(commands),
        worker_version_stamp=WorkerVersionStamp(build_id, use_versioning=False),
    )


def run_activity(namespace: Namespace, *, fail: bool = False) -> None:
    task = poll_once(namespace, "q", "activity", "test-worker")
    assert task is not None
    if fail:
        failure = {"message": "card declined", "non_retryable": True}
        kernel.respond_activity_task_failed(
            scope=scope_of(task), task_token=task["task_token"], failure=failure
        )
    else:
        kernel.respond_activity_task_completed(scope=scope_of(task), task_token=task["task_token"], result=[])


def order_story(namespace: Namespace) -> WorkflowExecution:
    """Build v1 charges (completed), a signal arrives, build v2 ships (fails), then sets a timer.

    Three completed workflow tasks; the run's first failure is the Ship activity's.
    """
    run = ExecutionFactory(namespace=namespace, workflow_id="order-1", workflow_type="Order", task_queue="q")
    complete_workflow_task(namespace, "v1", activity("a1", "Charge"))
    run_activity(namespace)
    kernel.signal_workflow_execution(
        namespace, workflow_id="order-1", run_id=None, signal_name="approve", input=[]
    )
    ship = activity("a2", "Ship", retry_policy={"maximum_attempts": 1})
    complete_workflow_task(namespace, "v2", ship)
    run_activity(namespace, fail=True)
    timer = {"command_type": "StartTimer", "attributes": {"timer_id": "t1", "start_to_fire_timeout": 600}}
    complete_workflow_task(namespace, "v2", timer)
    return WorkflowExecution.objects.get(run_id=run.run_id)


def completed_ids(run: WorkflowExecution) -> list[int]:
    events = HistoryEvent.objects.filter(run=run, event_type="WorkflowTaskCompleted").order_by("event_id")
    return list(events.values_list("event_id", flat=True))


def test_quick_picks_and_builds_resolve_to_their_workflow_tasks() -> None:
    run = order_story(NamespaceFactory())
    first, second, third = completed_ids(run)
    failure = HistoryEvent.objects.get(run=run, event_type="ActivityTaskFailed").event_id
    assert second < failure < third

    assert resolve_reset_point(run, "first") == first
    assert resolve_reset_point(run, "last") == third
    assert resolve_reset_point(run, "before_failure") == second
    assert resolve_reset_point(run, BuildIdPoint("v1")) == first
    assert resolve_reset_point(run, BuildIdPoint("v2")) == second
    with pytest.raises(ChronicleError, match="no workflow task of the run was completed by build 'v3'"):
        resolve_reset_point(run, BuildIdPoint("v3"))


def test_before_failure_needs_a_failure_and_a_task_completed_before_it() -> None:
    namespace = NamespaceFactory()
    healthy = ExecutionFactory(namespace=namespace, workflow_id="fine", task_queue="q")
    complete_workflow_task(namespace, "v1")
    with pytest.raises(ChronicleError, match="no failure"):
        resolve_reset_point(healthy, "before_failure")

    failing = ExecutionFactory(namespace=namespace, workflow_id="broken", task_queue="q")
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_failed(
        scope=scope_of(task),
        task_token=task["task_token"],
        cause="WorkflowWorkerUnhandledFailure",
        failure={"message": "boom"},
    )
    with pytest.raises(ChronicleError, match="no workflow task completed before the first failure"):
        resolve_reset_point(failing, "before_failure")


def test_a_reset_written_task_failure_is_not_the_runs_first_failure() -> None:
    namespace = NamespaceFactory()
    base = order_story(namespace)
    first, _, _ = completed_ids(base)
    new_run_id = kernel.reset_workflow_execution(
        namespace, workflow_id="order-1", run_id=str(base.run_id), point="last", reason="retry"
    )
    new = WorkflowExecution.objects.get(run_id=new_run_id)
    # The copied prefix keeps the Ship failure; the reset's own WorkflowTaskFailed comes after it.
    failure = HistoryEvent.objects.get(run=new, event_type="ActivityTaskFailed").event_id
    assert resolve_reset_point(new, "before_failure") < failure
    assert resolve_reset_point(new, "first") == first


def test_reset_points_say_what_happened_until_the_next_point() -> None:
    run = order_story(NamespaceFactory())
    points = reset_points(run)
    assert [p.event_id for p in points] == completed_ids(run)
    assert [p.build_id for p in points] == ["v1", "v2", "v2"]
    assert builds_seen(points) == ["v1", "v2"]

    charge, ship, timer = points
    assert charge.activities == {"Charge completed": 1} and charge.signals == {"approve": 1}
    assert charge.events_by_type["ActivityTaskScheduled"] == 1
    assert charge.events_by_type["WorkflowExecutionSignaled"] == 1
    assert ship.activities == {"Ship failed": 1} and ship.signals == {}
    assert timer.events_by_type == {"TimerStarted": 1}


def test_the_preview_lists_signals_by_the_toggle_and_side_effects_after_the_point() -> None:
    namespace = NamespaceFactory()
    order_story(namespace)
    kept = kernel.preview_reset(namespace, workflow_id="order-1", run_id=None, point="first")
    assert [s["signal_name"] for s in kept["signals_to_reapply"]] == ["approve"]
    assert kept["signals_not_reapplied"] == [] and kept["reapply_signals"] is True
    assert [a["activity_type"] for a in kept["activities_completed_after_point"]] == ["Charge"]
    assert kept["children_started_after_point"] == [] and kept["signals_sent_after_point"] == []
    assert [t["timer_id"] for t in kept["pending_dropped"]["timers"]] == ["t1"]

    left_out = kernel.preview_reset(
        namespace, workflow_id="order-1", run_id=None, point="first", reapply_signals=False
    )
    assert left_out["signals_to_reapply"] == []
    assert [s["signal_name"] for s in left_out["signals_not_reapplied"]] == ["approve"]
