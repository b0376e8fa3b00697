"""A workflow-task completion that closes the run says so in its answer.

On the real PostgreSQL through the kernel: the answer carries the close event as the
history has it and the run that carries on, so a caller in the completing worker's
process can take the result from it (the SDK does, for runs it started eagerly).
"""

from __future__ import annotations

from typing import Any

import pytest

from history import kernel
from history.models import HistoryEvent, WorkflowExecution
from matching.dispatch import poll_once
from tests.factories import ExecutionFactory, scope_of

pytestmark = pytest.mark.django_db


def _complete(run: WorkflowExecution, command_type: str, **attributes: Any) -> kernel.CompletionResult:
    task = poll_once(run.namespace, run.task_queue, "workflow", "w1")
    assert task is not None
    command = {"command_type": command_type, "attributes": attributes}
    return kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[command]
    )


def test_a_closing_completion_answers_with_the_close_event() -> None:
    run = ExecutionFactory()

    result = _complete(run, "CompleteWorkflowExecution", result={"total": 7})

    assert result.closed is not None and result.closed["new_run_id"] is None
    event = result.closed["event"]
    stored = HistoryEvent.objects.get(run=run, event_type="WorkflowExecutionCompleted")
    assert (event["event_id"], event["event_type"]) == (stored.event_id, "WorkflowExecutionCompleted")
    assert event["attributes"] == stored.attributes and event["attributes"]["result"] == {"total": 7}


def test_a_continue_as_new_names_the_run_that_carries_on() -> None:
    run = ExecutionFactory()

    result = _complete(run, "ContinueAsNewWorkflowExecution", input=[1])

    assert result.closed is not None
    assert result.closed["event"]["event_type"] == "WorkflowExecutionContinuedAsNew"
    successor = WorkflowExecution.objects.get(
        namespace=run.namespace, workflow_id=run.workflow_id, status="Running"
    )
    assert result.closed["new_run_id"] == str(successor.run_id)


def test_a_completion_that_leaves_the_run_open_says_nothing_of_a_close() -> None:
    run = ExecutionFactory()

    result = _complete(run, "StartTimer", timer_id="t", start_to_fire_timeout=60)

    assert result.closed is None
