"""Child and external-workflow duties in the kernel: validation, idempotent carrying, linking.

These drive the kernel and the transfer carrier directly on the real database, the way the
shard owner does, so a duty can be carried twice (a crash between its two transactions).
"""

from __future__ import annotations

from typing import Any

import pytest

from history import kernel
from history.kernel.timers import ShardFence
from history.kernel.transfers import process_transfer
from history.models import (
    HistoryEvent,
    PendingChildExecution,
    Shard,
    TimerKind,
    TimerTask,
    WorkflowExecution,
)
from matching.dispatch import poll_once
from tests.factories import ExecutionFactory, scope_of


def _events(execution: WorkflowExecution) -> list[HistoryEvent]:
    return list(HistoryEvent.objects.filter(run=execution).order_by("event_id"))


def _complete(execution: WorkflowExecution, *commands: dict[str, Any]) -> None:
    task = poll_once(execution.namespace, execution.task_queue, "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=list(commands)
    )


def _start_child(workflow_id: str, **attributes: Any) -> dict[str, Any]:
    return {
        "command_type": "StartChildWorkflowExecution",
        "attributes": {"workflow_id": workflow_id, "workflow_type": {"name": "Kid"}, **attributes},
    }


def _duties(execution: WorkflowExecution, kind: str) -> list[TimerTask]:
    return list(TimerTask.objects.filter(run=execution, kind=kind))


def _fence(execution: WorkflowExecution) -> ShardFence:
    shard, _ = Shard.objects.get_or_create(shard_id=execution.shard_id, defaults={"range_id": 1})
    return ShardFence(shard.shard_id, shard.range_id)


@pytest.mark.django_db
def test_a_bad_parent_close_policy_fails_the_workflow_task_and_writes_nothing() -> None:
    parent = ExecutionFactory()
    _complete(parent, _start_child("kid", parent_close_policy="PARENT_CLOSE_POLICY_SOMETIMES"))
    failed = [e for e in _events(parent) if e.event_type == "WorkflowTaskFailed"]
    assert failed[0].attributes["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES"
    assert not PendingChildExecution.objects.filter(run=parent).exists()
    assert not _duties(parent, TimerKind.START_CHILD)


@pytest.mark.django_db(transaction=True)
def test_a_child_start_carried_twice_starts_one_child_and_records_it_once() -> None:
    parent = ExecutionFactory()
    _complete(parent, _start_child("kid-once"))
    [duty] = _duties(parent, TimerKind.START_CHILD)
    pending = PendingChildExecution.objects.get(run=parent)
    assert pending.parent_close_policy == "PARENT_CLOSE_POLICY_TERMINATE"

    fence = _fence(parent)
    child_request = TimerTask.objects.get(id=duty.id)
    assert process_transfer(fence, duty.id)
    # The same duty again, as after a crash before its row was deleted: nothing new happens.
    child_request.save()
    assert process_transfer(fence, child_request.id)

    children = WorkflowExecution.objects.filter(namespace=parent.namespace, workflow_id="kid-once")
    assert children.count() == 1
    child = children.get()
    assert (child.parent_workflow_id, child.parent_run_id) == (parent.workflow_id, parent.run_id)
    started = [e for e in _events(parent) if e.event_type == "ChildWorkflowExecutionStarted"]
    assert len(started) == 1
    assert started[0].attributes["initiated_event_id"] == pending.initiated_event_id
    pending.refresh_from_db()
    assert (pending.started_run_id, pending.started_event_id) == (child.run_id, started[0].event_id)


@pytest.mark.django_db(transaction=True)
def test_a_closing_parent_leaves_a_close_policy_duty_per_started_child() -> None:
    parent = ExecutionFactory()
    _complete(
        parent,
        _start_child("kid-terminate"),
        _start_child("kid-abandon", parent_close_policy="ABANDON"),
    )
    fence = _fence(parent)
    for duty in _duties(parent, TimerKind.START_CHILD):
        process_transfer(fence, duty.id)
    parent.refresh_from_db()
    kernel.terminate_workflow_execution(
        parent.namespace, workflow_id=parent.workflow_id, run_id=None, reason="done"
    )
    [policy_duty] = _duties(parent, TimerKind.PARENT_CLOSE_POLICY)
    assert process_transfer(fence, policy_duty.id)
    kid = WorkflowExecution.objects.get(namespace=parent.namespace, workflow_id="kid-terminate")
    abandoned = WorkflowExecution.objects.get(namespace=parent.namespace, workflow_id="kid-abandon")
    assert (kid.status, abandoned.status) == ("Terminated", "Running")
    assert _events(kid)[-1].attributes["reason"] == "by parent close policy"
    assert not PendingChildExecution.objects.filter(run=parent).exists()
