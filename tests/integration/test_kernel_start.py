"""Start semantics through the kernel: ID reuse and conflict policies, request-id dedup."""

from __future__ import annotations

import time
from typing import Any

import pytest

from chronicle.errors import ChronicleError, ErrorCode
from history import kernel
from history.models import ExecutionStatus, HistoryEvent, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import Namespace
from tests.factories import ExecutionFactory, NamespaceFactory, scope_of

pytestmark = pytest.mark.django_db


def start_again(first: WorkflowExecution, **options: Any) -> kernel.StartResult:
    """Start another run under ``first``'s workflow id."""
    request = kernel.StartRequest(
        workflow_id=first.workflow_id,
        workflow_type=first.workflow_type,
        task_queue=first.task_queue,
        **options,
    )
    return kernel.start_workflow_execution(first.namespace, request)


def complete(execution: WorkflowExecution) -> None:
    """Play the worker: take the run's first workflow task and complete the workflow."""
    task = poll_once(execution.namespace, execution.task_queue, "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[{"command_type": "CompleteWorkflowExecution", "attributes": {"result": [1]}}],
    )
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPLETED


def terminate(execution: WorkflowExecution) -> None:
    kernel.terminate_workflow_execution(
        execution.namespace, workflow_id=execution.workflow_id, run_id=str(execution.run_id)
    )


def runs_of(first: WorkflowExecution) -> int:
    return WorkflowExecution.objects.filter(namespace=first.namespace, workflow_id=first.workflow_id).count()


@pytest.mark.parametrize(
    ("policy", "close", "allowed"),
    [
        ("ALLOW_DUPLICATE", complete, True),
        ("ALLOW_DUPLICATE", terminate, True),
        ("ALLOW_DUPLICATE_FAILED_ONLY", complete, False),
        ("ALLOW_DUPLICATE_FAILED_ONLY", terminate, True),
        ("REJECT_DUPLICATE", complete, False),
        ("REJECT_DUPLICATE", terminate, False),
    ],
)
def test_reuse_policy_decides_about_a_closed_run(policy: str, close: Any, allowed: bool) -> None:
    first = ExecutionFactory()
    close(first)
    if allowed:
        result = start_again(first, id_reuse_policy=policy)
        assert result.started and result.run_id != str(first.run_id)
        assert runs_of(first) == 2
    else:
        with pytest.raises(ChronicleError) as refused:
            start_again(first, id_reuse_policy=policy)
        assert refused.value.code == ErrorCode.WORKFLOW_ALREADY_STARTED
        assert refused.value.details["run_id"] == str(first.run_id)
        assert runs_of(first) == 1


def test_conflict_fail_refuses_a_second_run_while_one_runs() -> None:
    first = ExecutionFactory()
    with pytest.raises(ChronicleError) as refused:
        start_again(first, id_conflict_policy="FAIL")
    assert refused.value.code == ErrorCode.WORKFLOW_ALREADY_STARTED
    assert runs_of(first) == 1


def test_conflict_use_existing_returns_the_running_run() -> None:
    first = ExecutionFactory()
    result = start_again(first, id_conflict_policy="USE_EXISTING")
    assert result == kernel.StartResult(str(first.run_id), started=False, created=False)
    assert runs_of(first) == 1


@pytest.mark.parametrize(
    "options",
    [{"id_conflict_policy": "TERMINATE_EXISTING"}, {"id_reuse_policy": "TERMINATE_IF_RUNNING"}],
)
def test_terminate_existing_is_busy_for_a_second_then_replaces_the_run(options: dict[str, str]) -> None:
    first = ExecutionFactory()
    with pytest.raises(ChronicleError) as busy:
        start_again(first, **options)
    assert busy.value.code == ErrorCode.BUSY_WORKFLOW and busy.value.retry_after == 1
    time.sleep(1.1)
    result = start_again(first, **options)
    first.refresh_from_db()
    assert result.started and first.status == ExecutionStatus.TERMINATED
    terminated = HistoryEvent.objects.get(run=first, event_type="WorkflowExecutionTerminated")
    assert result.run_id in terminated.attributes["details"]
    assert WorkflowExecution.objects.get(run_id=result.run_id).status == ExecutionStatus.RUNNING


def test_a_retried_start_with_the_same_request_id_returns_the_same_run() -> None:
    first = ExecutionFactory(request_id="req-1")
    again = start_again(first, request_id="req-1", id_conflict_policy="FAIL")
    assert again == kernel.StartResult(str(first.run_id), started=True, created=False)
    assert runs_of(first) == 1
    assert HistoryEvent.objects.filter(run=first, event_type="WorkflowExecutionStarted").count() == 1


def test_a_different_request_id_is_a_new_start() -> None:
    first = ExecutionFactory(request_id="req-1")
    with pytest.raises(ChronicleError):
        start_again(first, request_id="req-2", id_conflict_policy="FAIL")


def test_the_same_workflow_id_in_two_namespaces_is_two_workflows() -> None:
    first = ExecutionFactory(workflow_id="shared-id")
    other: Namespace = NamespaceFactory()
    second = ExecutionFactory(namespace=other, workflow_id="shared-id")
    assert first.run_id != second.run_id
    assert runs_of(first) == 1 and runs_of(second) == 1
