"""Reset through the kernel and its management command, on real PostgreSQL."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from executions.search_attributes import add_attribute
from history import kernel
from history.kernel.payloads import payload_size
from history.models import HistoryEvent, PendingActivity, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.factories import NamespaceFactory, scope_of

pytestmark = pytest.mark.django_db


def _run_with_pending_work(namespace: Namespace) -> WorkflowExecution:
    """One completed workflow task (event 4) that scheduled an activity and started a timer."""
    add_attribute(namespace, "k", "Int")
    kernel.start_workflow_execution(
        namespace, kernel.StartRequest(workflow_id="order-1", workflow_type="Order", task_queue="q")
    )
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[
            {
                "command_type": "ScheduleActivityTask",
                "attributes": {
                    "activity_id": "a1",
                    "activity_type": "Charge",
                    "start_to_close_timeout": 5,
                    "input": [{"card": "4242", "amount": 12}],
                },
            },
            {"command_type": "StartTimer", "attributes": {"timer_id": "t1", "start_to_fire_timeout": 60}},
            {"command_type": "UpsertWorkflowSearchAttributes", "attributes": {"search_attributes": {"k": 1}}},
        ],
    )
    kernel.signal_workflow_execution(
        namespace, workflow_id="order-1", run_id=None, signal_name="go", input=[], request_id="sig-1"
    )
    return WorkflowExecution.objects.get(namespace=namespace, workflow_id="order-1")


def test_preview_writes_nothing_and_the_reset_rebuilds_state_of_the_point() -> None:
    namespace = NamespaceFactory()
    base = _run_with_pending_work(namespace)
    events_before = HistoryEvent.objects.count()

    preview = kernel.preview_reset(namespace, workflow_id="order-1", run_id=None, point="last")
    assert preview["reset_event_id"] == 4 and preview["events_kept"] == 3
    assert preview["events_dropped_by_type"] == {
        "ActivityTaskScheduled": 1,
        "TimerStarted": 1,
        "UpsertWorkflowSearchAttributes": 1,
        "WorkflowExecutionSignaled": 1,
        "WorkflowTaskCompleted": 1,
        "WorkflowTaskScheduled": 1,
    }
    assert [a["activity_id"] for a in preview["pending_dropped"]["activities"]] == ["a1"]
    assert HistoryEvent.objects.count() == events_before

    out = io.StringIO()
    call_command(
        "reset_execution",
        namespace.name,
        "order-1",
        "--reset-type",
        "LastWorkflowTask",
        "--reason",
        "from the shell",
        "--no-reapply-signals",
        stdout=out,
    )
    new = WorkflowExecution.objects.get(run_id=out.getvalue().strip())
    # As of event 3 nothing was scheduled, upserted or signalled.
    assert not PendingActivity.objects.filter(run=new).exists()
    assert not TimerTask.objects.filter(run=new, kind=TimerKind.USER_TIMER).exists()
    assert new.search_attributes == {} and new.signal_count == 0
    assert new.next_event_id == 6 and new.wft_scheduled_event_id == 5
    base.refresh_from_db()
    assert base.status == "Terminated" and base.reset_run_id == new.run_id


def test_a_later_point_restores_the_activity_timer_and_search_attributes() -> None:
    namespace = NamespaceFactory()
    base = _run_with_pending_work(namespace)
    task = poll_once(namespace, "q", "workflow", "test-worker")  # the signal's task
    assert task is not None
    kernel.respond_workflow_task_completed(scope=scope_of(task), task_token=task["task_token"], commands=[])
    completed = HistoryEvent.objects.filter(run=base, event_type="WorkflowTaskCompleted").order_by("event_id")
    point = completed.last()
    assert point is not None

    run_id = kernel.reset_workflow_execution(
        namespace, workflow_id="order-1", run_id=None, point=point.event_id, reason="again"
    )
    new = WorkflowExecution.objects.get(run_id=run_id)
    [activity] = PendingActivity.objects.filter(run=new)
    assert (activity.activity_id, activity.attempt, activity.state) == ("a1", 1, "SCHEDULED")
    # Replay reads a projection of each event; what it restores is read whole.
    assert activity.input == [{"card": "4242", "amount": 12}]
    assert activity.start_to_close_timeout == 5
    [timer] = TimerTask.objects.filter(run=new, kind=TimerKind.USER_TIMER)
    started = HistoryEvent.objects.get(run=base, event_type="TimerStarted")
    # The timer keeps the deadline it had in the base run, which dropped its own.
    assert timer.timer_id == "t1" and timer.fire_at == started.event_time + timedelta(seconds=60)
    assert not TimerTask.objects.filter(run=base, kind=TimerKind.USER_TIMER).exists()
    assert new.search_attributes == {"k": 1} and new.signal_count == 1
    assert new.signalrequest_set.filter(request_id="sig-1").exists()
    # The new run's history size counts the copied events (in PostgreSQL's text form, a little
    # above the compact measure) and what the reset appended since.
    copied = HistoryEvent.objects.filter(run=new, event_id__lt=point.event_id)
    compact = sum(payload_size(e.attributes) + len(e.event_type) for e in copied)
    assert compact <= new.history_size_bytes < base.history_size_bytes * 3


def test_the_command_reports_a_bad_point_clearly() -> None:
    namespace = NamespaceFactory()
    _run_with_pending_work(namespace)
    with pytest.raises(CommandError, match="ActivityTaskScheduled"):
        call_command("reset_execution", namespace.name, "order-1", "--event-id", "5", "--reason", "x")
