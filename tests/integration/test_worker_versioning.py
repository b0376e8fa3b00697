"""Worker versioning on real PostgreSQL: pinning at start, build-aware claims, their plan."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection

from history import kernel
from history.kernel.versioning import WorkerVersionStamp
from history.models import HistoryEvent, Task, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.models import Namespace
from namespaces.services import build_id_set_current
from tests.factories import ExecutionFactory, NamespaceFactory, scope_of
from tests.integration.test_kernel_query_plans import captured_sql, fill_other_queues, plan_without_seqscans

pytestmark = pytest.mark.django_db


def _versioned(build_id: str) -> WorkerVersionStamp:
    return WorkerVersionStamp(build_id=build_id, use_versioning=True)


def _set_current(namespace: Namespace, queue: str, build_id: str) -> None:
    build_id_set_current(namespace=namespace, task_queue=queue, build_id=build_id, set_by="test")


def test_a_run_is_pinned_to_the_current_build_of_its_queue_when_it_starts() -> None:
    namespace = NamespaceFactory()
    _set_current(namespace, "orders", "A")
    on_a = ExecutionFactory(namespace=namespace, task_queue="orders")
    _set_current(namespace, "orders", "B")
    on_b = ExecutionFactory(namespace=namespace, task_queue="orders")
    unversioned = ExecutionFactory(namespace=namespace, task_queue="elsewhere")
    assert (on_a.assigned_build_id, on_b.assigned_build_id, unversioned.assigned_build_id) == ("A", "B", "")
    assert list(Task.objects.filter(run=on_a).values_list("build_id", flat=True)) == ["A"]
    started = HistoryEvent.objects.get(run=on_a, event_id=1)
    assert started.attributes["assigned_build_id"] == "A"


def test_a_pinned_task_goes_only_to_a_poller_of_its_build() -> None:
    namespace = NamespaceFactory()
    _set_current(namespace, "orders", "A")
    run = ExecutionFactory(namespace=namespace, task_queue="orders")
    assert poll_once(namespace, "orders", "workflow", "unversioned") is None
    assert poll_once(namespace, "orders", "workflow", "b-worker", _versioned("B")) is None
    # A build id without use_versioning is only recorded: such a worker is unversioned.
    assert poll_once(namespace, "orders", "workflow", "a-unopted", WorkerVersionStamp("A", False)) is None
    task = poll_once(namespace, "orders", "workflow", "a-worker", _versioned("A"))
    assert task is not None and task["workflow_execution"]["run_id"] == str(run.run_id)
    started = HistoryEvent.objects.get(run=run, event_type="WorkflowTaskStarted")
    assert started.attributes["worker_version"] == {"build_id": "A", "use_versioning": True}
    assert started.attributes["identity"] == "a-worker"


def test_continue_as_new_on_the_same_queue_keeps_the_build_and_on_another_takes_its_current() -> None:
    namespace = NamespaceFactory(workflow_id_reuse_minimal_interval=0)  # no hold-back between runs
    _set_current(namespace, "orders", "A")
    _set_current(namespace, "billing", "C")
    run = ExecutionFactory(namespace=namespace, task_queue="orders")
    _set_current(namespace, "orders", "B")
    same_queue = _continue_as_new(namespace, run, {})
    assert same_queue.assigned_build_id == "A"
    other_queue = _continue_as_new(namespace, same_queue, {"task_queue": {"name": "billing"}})
    assert other_queue.assigned_build_id == "C"


def _continue_as_new(
    namespace: Namespace, run: WorkflowExecution, attributes: dict[str, Any]
) -> WorkflowExecution:
    """Complete the run's workflow task (on its build) with ContinueAsNew; return the next run."""
    task = poll_once(namespace, run.task_queue, "workflow", "w", _versioned(run.assigned_build_id))
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[{"command_type": "ContinueAsNewWorkflowExecution", "attributes": attributes}],
        worker_version_stamp=_versioned(run.assigned_build_id),
    )
    run.refresh_from_db()
    completed = HistoryEvent.objects.get(run=run, event_type="WorkflowTaskCompleted")
    assert completed.attributes["worker_version"]["build_id"] == run.assigned_build_id
    return WorkflowExecution.objects.get(run_id=run.new_run_id)


def test_a_query_task_of_a_pinned_run_goes_to_its_build() -> None:
    namespace = NamespaceFactory()
    _set_current(namespace, "orders", "A")
    run = ExecutionFactory(namespace=namespace, task_queue="orders")
    first = poll_once(namespace, "orders", "workflow", "w", _versioned("A"))
    assert first is not None
    kernel.respond_workflow_task_completed(scope=scope_of(first), task_token=first["task_token"], commands=[])
    kernel.create_query(
        namespace, workflow_id=run.workflow_id, run_id=None, query_type="status", query_args=[]
    )
    assert poll_once(namespace, "orders", "workflow", "b", _versioned("B")) is None
    query_task = poll_once(namespace, "orders", "workflow", "a", _versioned("A"))
    assert query_task is not None and query_task["query"]["query_type"] == "status"


def test_a_reset_run_goes_to_the_current_build_not_the_base_runs() -> None:
    namespace = NamespaceFactory()
    _set_current(namespace, "orders", "A")
    run = ExecutionFactory(namespace=namespace, task_queue="orders")
    first = poll_once(namespace, "orders", "workflow", "w", _versioned("A"))
    assert first is not None
    kernel.respond_workflow_task_completed(scope=scope_of(first), task_token=first["task_token"], commands=[])
    _set_current(namespace, "orders", "B")
    new_run_id = kernel.reset_workflow_execution(
        namespace, workflow_id=run.workflow_id, run_id=None, point="first", reason="bad build A"
    )
    assert WorkflowExecution.objects.get(run_id=new_run_id).assigned_build_id == "B"
    assert poll_once(namespace, "orders", "workflow", "a", _versioned("A")) is None
    assert poll_once(namespace, "orders", "workflow", "b", _versioned("B")) is not None


def test_an_unversioned_queue_dispatches_to_unversioned_pollers_as_before() -> None:
    namespace = NamespaceFactory()
    ExecutionFactory(namespace=namespace, task_queue="plain")
    assert poll_once(namespace, "plain", "workflow", "versioned", _versioned("A")) is None
    assert poll_once(namespace, "plain", "workflow", "plain-worker") is not None


def test_setting_the_same_build_twice_records_one_change() -> None:
    namespace = NamespaceFactory()
    assert build_id_set_current(namespace=namespace, task_queue="q", build_id="A", set_by="ops")
    assert not build_id_set_current(namespace=namespace, task_queue="q", build_id="A", set_by="ops")
    assert namespace.build_ids.count() == 1


def test_the_build_aware_claim_filters_by_build_inside_the_dispatch_index() -> None:
    namespace = NamespaceFactory()
    _set_current(namespace, "orders", "A")
    fill_other_queues(ExecutionFactory(namespace=namespace, task_queue="orders"))
    sql = captured_sql(
        lambda: poll_once(namespace, "orders", "workflow", "a-worker", _versioned("A")), "SKIP LOCKED"
    )
    nodes = plan_without_seqscans(sql)
    scans = [n for n in nodes if n.get("Index Name") == "task_dispatch_build"]
    assert scans, nodes
    assert "build_id" in scans[0]["Index Cond"]


def test_a_start_reads_its_queues_build_in_the_statement_that_locks_the_id() -> None:
    """One statement locks the id's latest run and reads the queue's current build, and a
    run that replaces a closed one is pinned to the build current at its start."""
    namespace = NamespaceFactory()
    _set_current(namespace, "orders", "A")
    first = ExecutionFactory(namespace=namespace, task_queue="orders", workflow_id="order-1")
    kernel.terminate_workflow_execution(namespace, workflow_id="order-1", run_id=None, reason="done")
    _set_current(namespace, "orders", "B")
    request = kernel.StartRequest(workflow_id="order-1", workflow_type="T", task_queue="orders")
    issued: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        issued.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        second = kernel.start_workflow_execution(namespace, request)
    builds = [sql for sql in issued if "namespaces_taskqueuebuildid" in sql]
    assert len(builds) == 1 and "FOR UPDATE" in builds[0], issued
    runs = WorkflowExecution.objects.filter(namespace=namespace, workflow_id="order-1")
    pinned = dict(runs.values_list("run_id", "assigned_build_id"))
    assert pinned == {first.run_id: "A", uuid.UUID(second.run_id): "B"}
