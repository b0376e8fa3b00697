"""Workflow Update in the kernel, on real PostgreSQL: admission, the worker's messages, the
events they write (or do not), deduplication by update id, limits, and the dropped task."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from chronicle.errors import ChronicleError, ErrorCode
from history import kernel
from history.models import HistoryEvent, UpdateState, WorkflowExecution, WorkflowUpdate
from matching.dispatch import poll_once
from namespaces.models import MemberRole
from tests.factories import ExecutionFactory, MembershipFactory, scope_of

JSON_4 = {"metadata": {"encoding": "json/plain"}, "data": 4}


def event_types(execution: WorkflowExecution) -> list[str]:
    return list(
        HistoryEvent.objects.filter(run=execution).order_by("event_id").values_list("event_type", flat=True)
    )


def send(execution: WorkflowExecution, update_id: str = "u-1", name: str = "add") -> kernel.UpdateStatus:
    return kernel.update_workflow_execution(
        execution.namespace,
        workflow_id=execution.workflow_id,
        run_id=None,
        request=kernel.UpdateRequest(update_id, name, [{"metadata": {}, "data": 3}]),
    )


def poll(execution: WorkflowExecution) -> dict[str, Any]:
    task = poll_once(execution.namespace, execution.task_queue, "workflow", "test-worker")
    assert task is not None
    return task


def complete(
    task: dict[str, Any], messages: list[dict[str, Any]], commands: list[dict[str, Any]] | None = None
) -> kernel.CompletionResult:
    return kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=commands or [],
        identity="test-worker",
        messages=messages,
    )


def idle_run() -> WorkflowExecution:
    """A run whose first workflow task completed with nothing to do: it waits, idle."""
    execution = ExecutionFactory()
    complete(poll(execution), [])
    return execution


@pytest.mark.django_db
def test_an_update_rides_on_the_next_task_and_is_accepted_and_completed_as_events() -> None:
    execution = idle_run()
    status = send(execution)
    assert status.stage == "ADMITTED"
    task = poll(execution)
    assert [m["update_id"] for m in task["messages"]] == ["u-1"]
    assert task["messages"][0]["name"] == "add"
    complete(
        task,
        [
            {"type": "Acceptance", "update_id": "u-1"},
            {"type": "Response", "update_id": "u-1", "success": {"metadata": {}, "data": 4}},
        ],
    )
    types = event_types(execution)
    assert types[-2:] == ["WorkflowExecutionUpdateAccepted", "WorkflowExecutionUpdateCompleted"]
    accepted = HistoryEvent.objects.get(run=execution, event_type="WorkflowExecutionUpdateAccepted")
    completed = HistoryEvent.objects.get(run=execution, event_type="WorkflowExecutionUpdateCompleted")
    assert accepted.attributes["protocol_instance_id"] == "u-1"
    assert accepted.attributes["accepted_request"]["input"]["name"] == "add"
    assert completed.attributes["accepted_event_id"] == accepted.event_id
    assert completed.attributes["outcome"] == {"success": {"metadata": {}, "data": 4}}
    again = send(execution)
    assert (again.stage, again.outcome) == ("COMPLETED", {"success": {"metadata": {}, "data": 4}})
    execution.refresh_from_db()
    assert execution.updates_in_flight == 0


@pytest.mark.django_db
def test_a_rejected_update_writes_no_event_of_its_own_and_history_stays_append_only() -> None:
    execution = idle_run()
    before = event_types(execution)
    send(execution)
    task = poll(execution)
    complete(task, [{"type": "Rejection", "update_id": "u-1", "failure": {"message": "no negatives"}}])
    # The task that carried it stays, as every task does; no update event is written.
    task_events = ["WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted"]
    assert event_types(execution) == before + task_events
    execution.refresh_from_db()
    assert execution.next_event_id == len(before) + 4
    assert not execution.has_pending_workflow_task
    status = send(execution)
    assert (status.stage, status.outcome) == ("COMPLETED", {"failure": {"message": "no negatives"}})
    # The run goes on: a signal gets the next event id (none is ever reused) and a task.
    kernel.signal_workflow_execution(
        execution.namespace, workflow_id=execution.workflow_id, run_id=None, signal_name="s", input=[]
    )
    after = event_types(execution)[len(before) + 3 :]
    assert after == ["WorkflowExecutionSignaled", "WorkflowTaskScheduled"]
    ids = list(
        HistoryEvent.objects.filter(run=execution).order_by("event_id").values_list("event_id", flat=True)
    )
    assert ids == list(range(1, len(ids) + 1))


@pytest.mark.django_db
def test_an_update_id_sent_twice_is_admitted_once_and_delivered_once() -> None:
    execution = idle_run()
    send(execution, "same")
    send(execution, "same")
    assert WorkflowUpdate.objects.filter(run=execution).count() == 1
    task = poll(execution)
    assert len(task["messages"]) == 1
    complete(task, [{"type": "Acceptance", "update_id": "same"}])
    complete(poll_after_signal(execution), [{"type": "Acceptance", "update_id": "same"}])
    assert event_types(execution).count("WorkflowExecutionUpdateAccepted") == 1


def poll_after_signal(execution: WorkflowExecution) -> dict[str, Any]:
    kernel.signal_workflow_execution(
        execution.namespace, workflow_id=execution.workflow_id, run_id=None, signal_name="s", input=[]
    )
    return poll(execution)


@pytest.mark.django_db
def test_an_update_admitted_while_a_task_runs_gets_the_next_task_and_blocks_a_close() -> None:
    execution = ExecutionFactory()
    task = poll(execution)
    send(execution, "late")
    closing = [{"command_type": "CompleteWorkflowExecution", "attributes": {"result": None}}]
    complete(task, [], closing)
    execution.refresh_from_db()
    assert execution.is_running  # the close waits for the update to be seen
    assert event_types(execution)[-2:] == ["WorkflowTaskFailed", "WorkflowTaskScheduled"]
    retry = poll(execution)
    assert [m["update_id"] for m in retry["messages"]] == ["late"]


@pytest.mark.django_db
def test_a_response_for_an_update_never_accepted_fails_the_task() -> None:
    execution = idle_run()
    send(execution)
    task = poll(execution)
    complete(task, [{"type": "Response", "update_id": "u-1", "success": None}])
    assert "WorkflowExecutionUpdateCompleted" not in event_types(execution)
    failed = HistoryEvent.objects.filter(run=execution, event_type="WorkflowTaskFailed").get()
    assert failed.attributes["cause"].endswith("BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE")
    assert WorkflowUpdate.objects.get(run=execution).state == UpdateState.ADMITTED


@pytest.mark.django_db
def test_an_accepted_update_survives_its_task_and_is_completed_by_a_later_one() -> None:
    execution = idle_run()
    send(execution)
    complete(poll(execution), [{"type": "Acceptance", "update_id": "u-1"}])
    assert send(execution).stage == "ACCEPTED"
    # Another worker, after replaying the accepted event, completes it on the next task.
    complete(poll_after_signal(execution), [{"type": "Response", "update_id": "u-1", "success": 1}])
    assert send(execution).outcome == {"success": 1}


@pytest.mark.django_db
def test_updates_count_toward_the_signal_limit_and_the_in_flight_limit() -> None:
    execution = idle_run()
    namespace = execution.namespace
    for n in range(10):
        send(execution, f"u-{n}")
    with pytest.raises(ChronicleError) as busy:
        send(execution, "u-10")
    assert busy.value.code == ErrorCode.RATE_LIMITED
    namespace.max_signals_per_execution = 10
    namespace.save()
    with pytest.raises(ChronicleError) as limit:
        kernel.signal_workflow_execution(
            namespace, workflow_id=execution.workflow_id, run_id=None, signal_name="s", input=[]
        )
    assert limit.value.code == ErrorCode.LIMIT_EXCEEDED


@pytest.mark.django_db
def test_an_update_to_a_closed_run_gets_its_outcome_if_known_and_not_found_otherwise() -> None:
    execution = ExecutionFactory()
    send(execution, "known")
    kernel.terminate_workflow_execution(execution.namespace, workflow_id=execution.workflow_id, run_id=None)
    known = send(execution, "known")
    assert known.stage == "COMPLETED"
    assert known.outcome is not None and "completed before the Update" in known.outcome["failure"]["message"]
    with pytest.raises(ChronicleError) as gone:
        send(execution, "unknown")
    assert gone.value.code == ErrorCode.WORKFLOW_NOT_RUNNING


@pytest.mark.django_db
def test_the_run_page_shows_accepted_and_completed_updates() -> None:
    execution = idle_run()
    send(execution, "add-apple")
    complete(
        poll(execution),
        [
            {"type": "Acceptance", "update_id": "add-apple"},
            {"type": "Response", "update_id": "add-apple", "success": JSON_4},
        ],
    )
    viewer = Client()
    member = MembershipFactory(namespace=execution.namespace, role=MemberRole.VIEWER)
    viewer.force_login(member.user)
    page = f"/ns/{execution.namespace.name}/workflows/{execution.workflow_id}/runs/{execution.run_id}/"
    body = viewer.get(page).content.decode()
    assert "WorkflowExecutionUpdateAccepted" in body and "WorkflowExecutionUpdateCompleted" in body
    assert "update add (add-apple)" in body
    assert "update add-apple · result 4" in body


@pytest.mark.django_db
def test_a_reset_keeps_an_accepted_update_that_the_new_run_then_completes() -> None:
    execution = idle_run()
    send(execution, "held")
    complete(poll(execution), [{"type": "Acceptance", "update_id": "held"}])
    complete(poll_after_signal(execution), [])
    point = HistoryEvent.objects.filter(run=execution, event_type="WorkflowTaskCompleted").last()
    assert point is not None
    new_run_id = kernel.reset_workflow_execution(
        execution.namespace, workflow_id=execution.workflow_id, run_id=None, point=point.event_id, reason="r"
    )
    new = WorkflowExecution.objects.get(run_id=new_run_id)
    assert "WorkflowExecutionUpdateAccepted" in event_types(new)
    task = poll(new)
    assert task["messages"] == []
    complete(task, [{"type": "Response", "update_id": "held", "success": JSON_4}])
    assert event_types(new)[-1] == "WorkflowExecutionUpdateCompleted"
    status = kernel.update_workflow_execution(
        new.namespace, workflow_id=new.workflow_id, run_id=None, request=kernel.UpdateRequest("held", "add")
    )
    assert (status.run_id, status.outcome) == (str(new.run_id), {"success": JSON_4})
