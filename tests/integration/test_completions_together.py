"""Workflow-task completions of several runs written in one transaction, each answered and
written as it would be alone (``history.kernel.completions``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chronicle.errors import ChronicleError
from history import kernel
from history.kernel.tokens import TaskScope
from history.models import HistoryEvent, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.factories import ExecutionFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "together"
CLOSE = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 1}}
TIMER = {"command_type": "StartTimer", "attributes": {"timer_id": "t1", "start_to_fire_timeout": 60}}
UNKNOWN_TIMER = {"command_type": "CancelTimer", "attributes": {"timer_id": "no-such-timer"}}


def _task(namespace: Namespace) -> dict[str, Any]:
    run = ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    task = poll_once(run.namespace, QUEUE, "workflow", "w1")
    assert task is not None
    return task


def _call(namespace: Namespace, task: dict[str, Any], *commands: dict[str, Any]) -> dict[str, Any]:
    return {
        "scope": TaskScope(namespace.id, QUEUE),
        "task_token": task["task_token"],
        "commands": list(commands),
        "identity": "w1",
    }


def _events(task: dict[str, Any]) -> list[str]:
    run_id = task["workflow_execution"]["run_id"]
    return list(
        HistoryEvent.objects.filter(run_id=run_id).order_by("event_id").values_list("event_type", flat=True)
    )


def _status(task: dict[str, Any]) -> str:
    return WorkflowExecution.objects.get(run_id=task["workflow_execution"]["run_id"]).status


def test_completions_of_distinct_runs_are_one_lock_and_one_write(namespace: Namespace) -> None:
    tasks = [_task(namespace) for _ in range(5)]
    calls = [_call(namespace, t, CLOSE) for t in tasks[:4]] + [_call(namespace, tasks[4], TIMER)]

    with CaptureQueriesContext(connection) as queries:
        answers = kernel.respond_workflow_tasks_completed(calls)

    sqls = [q["sql"] for q in queries]
    assert sqls.count("COMMIT") == 1
    work = [sql for sql in sqls if sql not in ("BEGIN", "COMMIT")]
    # The runs' lock, the timer's look for a running timer of its id, then one write.
    assert len(work) == 3, [sql[:80] for sql in work]
    assert all(isinstance(a, kernel.CompletionResult) for a in answers)
    for task, answer in zip(tasks[:4], answers, strict=False):
        assert isinstance(answer, kernel.CompletionResult) and answer.closed is not None
        assert answer.closed["event"]["event_type"] == "WorkflowExecutionCompleted"
        assert _status(task) == "Completed"
        assert _events(task)[-2:] == ["WorkflowTaskCompleted", "WorkflowExecutionCompleted"]
    assert _status(tasks[4]) == "Running" and _events(tasks[4])[-1] == "TimerStarted"


def test_a_stale_or_foreign_task_in_the_group_is_refused_alone(namespace: Namespace) -> None:
    done, fresh, other = _task(namespace), _task(namespace), _task(namespace)
    kernel.respond_workflow_task_completed(**_call(namespace, done, TIMER))
    elsewhere = NamespaceFactory()
    foreign = _call(namespace, other, CLOSE) | {"scope": TaskScope(elsewhere.id, QUEUE)}

    answers = kernel.respond_workflow_tasks_completed(
        [_call(namespace, done, CLOSE), _call(namespace, fresh, CLOSE), foreign]
    )

    stale, completed, unknown = answers
    assert isinstance(stale, ChronicleError) and stale.code == "stale_task_token"
    assert isinstance(completed, kernel.CompletionResult) and completed.closed is not None
    assert isinstance(unknown, ChronicleError) and unknown.status == 404
    assert _events(done).count("WorkflowTaskCompleted") == 1 and _status(done) == "Running"
    assert _status(fresh) == "Completed"
    assert _status(other) == "Running" and "WorkflowTaskCompleted" not in _events(other)


def test_a_rejected_command_fails_its_own_task_and_the_others_complete(namespace: Namespace) -> None:
    first, rejected, last = _task(namespace), _task(namespace), _task(namespace)

    answers = kernel.respond_workflow_tasks_completed(
        [
            _call(namespace, first, CLOSE),
            _call(namespace, rejected, UNKNOWN_TIMER),
            _call(namespace, last, CLOSE),
        ]
    )

    assert all(isinstance(a, kernel.CompletionResult) for a in answers)
    assert _status(first) == _status(last) == "Completed"
    assert _events(first).count("WorkflowExecutionCompleted") == 1
    assert _status(rejected) == "Running"
    failed = HistoryEvent.objects.get(
        run_id=rejected["workflow_execution"]["run_id"], event_type="WorkflowTaskFailed"
    )
    assert failed.attributes["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_BAD_CANCEL_TIMER_ATTRIBUTES"


def test_a_run_named_twice_goes_alone_and_only_its_current_task_completes(namespace: Namespace) -> None:
    twice, once = _task(namespace), _task(namespace)

    answers = kernel.respond_workflow_tasks_completed(
        [_call(namespace, twice, CLOSE), _call(namespace, once, CLOSE), _call(namespace, twice, CLOSE)]
    )

    first, second, again = answers
    assert isinstance(first, kernel.CompletionResult) and isinstance(second, kernel.CompletionResult)
    assert isinstance(again, ChronicleError) and again.code == "stale_task_token"
    assert _events(twice).count("WorkflowExecutionCompleted") == 1
    assert _status(once) == "Completed"


def test_a_command_reaching_another_run_goes_alone_beside_the_group(namespace: Namespace) -> None:
    child = {
        "command_type": "StartChildWorkflowExecution",
        "attributes": {"workflow_id": "child-of-group", "workflow_type": "Child", "task_queue": QUEUE},
    }
    parent, first, second = _task(namespace), _task(namespace), _task(namespace)

    answers = kernel.respond_workflow_tasks_completed(
        [_call(namespace, first, CLOSE), _call(namespace, parent, child), _call(namespace, second, CLOSE)]
    )

    assert all(isinstance(a, kernel.CompletionResult) for a in answers)
    assert _status(first) == _status(second) == "Completed"
    assert "StartChildWorkflowExecutionInitiated" in _events(parent)
