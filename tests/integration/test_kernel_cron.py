"""Classic cron through the kernel: next runs, retries before cron, and where the chain ends."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode
from history import kernel
from history.cron import next_cron_time
from history.kernel import ShardFence, fire_timers
from history.models import ExecutionStatus, HistoryEvent, Shard, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from tests.factories import NamespaceFactory, scope_of

pytestmark = pytest.mark.django_db


def start_cron(expr: str, **options: Any) -> WorkflowExecution:
    namespace = NamespaceFactory()
    request = kernel.StartRequest(
        workflow_id="nightly", workflow_type="Report", task_queue="q", cron_schedule=expr, **options
    )
    result = kernel.start_workflow_execution(namespace, request)
    return WorkflowExecution.objects.get(run_id=result.run_id)


def run_task(run: WorkflowExecution, command_type: str, **attributes: Any) -> WorkflowExecution:
    """Let the run's backoff lapse, take its workflow task and answer with one close command."""
    Shard.objects.update_or_create(shard_id=run.shard_id, defaults={"range_id": 1})
    backoff = TimerTask.objects.get(run=run, kind=TimerKind.WORKFLOW_BACKOFF)
    assert fire_timers(ShardFence(run.shard_id, 1), [(backoff.id, str(run.run_id))]) == 1
    task = poll_once(run.namespace, run.task_queue, "workflow", "test-worker")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[{"command_type": command_type, "attributes": attributes}],
    )
    run.refresh_from_db()
    return run


def started(run_id: Any) -> dict[str, Any]:
    return dict(HistoryEvent.objects.get(run_id=run_id, event_id=1).attributes)


def closing(run: WorkflowExecution) -> dict[str, Any]:
    return dict(HistoryEvent.objects.filter(run=run).order_by("-event_id").first().attributes)  # type: ignore[union-attr]


def test_the_first_run_waits_for_the_next_cron_time() -> None:
    before = timezone.now()
    run = start_cron("*/5 * * * *")
    attrs = started(run.run_id)
    assert attrs["cron_schedule"] == "*/5 * * * *"
    expected = next_cron_time("*/5 * * * *", before)
    assert attrs["first_workflow_task_backoff"] == math.ceil((expected - run.start_time).total_seconds())
    assert expected <= run.execution_time < expected + timedelta(seconds=1)
    assert run.wft_scheduled_event_id == 0 and run.wft_backoff_until == run.execution_time


def test_a_completed_run_starts_the_next_at_the_time_after_its_scheduled_time() -> None:
    run = run_task(start_cron("*/5 * * * *"), "CompleteWorkflowExecution", result=[{"data": 1}])
    assert run.status == ExecutionStatus.COMPLETED
    assert closing(run)["new_execution_run_id"] == str(run.new_run_id)
    nxt = WorkflowExecution.objects.get(run_id=run.new_run_id)
    assert nxt.status == ExecutionStatus.RUNNING and nxt.cron_schedule == "*/5 * * * *"
    assert nxt.first_run_id == run.run_id and nxt.previous_run_id == run.run_id
    attrs = started(nxt.run_id)
    assert attrs["initiator"] == "CRON_SCHEDULE" and attrs["attempt"] == 1
    assert attrs["last_completion_result"] == [{"data": 1}]
    # The run finished before its own time came (the test fired its backoff early), so the
    # next run is the one after its scheduled time, five minutes later.
    assert nxt.execution_time - run.execution_time < timedelta(minutes=5, seconds=1)
    assert nxt.execution_time - run.execution_time >= timedelta(minutes=4, seconds=59)


def test_a_retry_comes_before_the_next_cron_run() -> None:
    policy = {"initial_interval": 1, "maximum_attempts": 2}
    first = run_task(start_cron("@hourly", retry_policy=policy), "FailWorkflowExecution")
    assert closing(first)["retry_state"] == "RETRY_STATE_IN_PROGRESS"
    retry = WorkflowExecution.objects.get(run_id=first.new_run_id)
    assert started(retry.run_id)["initiator"] == "RETRY" and retry.attempt == 2
    assert retry.cron_schedule == "@hourly"
    retry = run_task(retry, "FailWorkflowExecution", failure={"message": "again"})
    assert closing(retry)["retry_state"] == "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED"
    cron = WorkflowExecution.objects.get(run_id=retry.new_run_id)
    attrs = started(cron.run_id)
    assert attrs["initiator"] == "CRON_SCHEDULE" and attrs["attempt"] == 1
    assert attrs["continued_failure"] == {"message": "again"}
    assert cron.first_run_id == first.run_id


@pytest.mark.parametrize("command_type", ["CancelWorkflowExecution", "FailWorkflowExecution"])
def test_cancel_ends_the_chain_and_so_does_the_execution_expiration(command_type: str) -> None:
    run = start_cron("@hourly", execution_timeout=7200)
    if command_type == "FailWorkflowExecution":
        # The next hourly time lies past the expiration: no next run.
        WorkflowExecution.objects.filter(run_id=run.run_id).update(
            execution_expiration_time=timezone.now() + timedelta(minutes=1)
        )
        run.refresh_from_db()
    run = run_task(run, command_type)
    assert run.status in (ExecutionStatus.CANCELED, ExecutionStatus.FAILED)
    assert run.new_run_id is None and closing(run).get("new_execution_run_id") is None
    assert WorkflowExecution.objects.filter(workflow_id="nightly", namespace=run.namespace).count() == 1


def test_a_schedule_that_never_matches_is_refused() -> None:
    with pytest.raises(ChronicleError, match="never matches"):
        start_cron("0 0 31 2 *")


def test_a_query_fails_fast_while_the_first_task_waits_past_its_deadline() -> None:
    run = start_cron("0 0 29 2 *")  # the next leap day: far beyond any query deadline
    with pytest.raises(ChronicleError, match="nothing to query yet") as refused:
        kernel.create_query(
            run.namespace, workflow_id=run.workflow_id, run_id=None, query_type="q", query_args=[]
        )
    assert refused.value.code == ErrorCode.CONFLICT


def test_a_query_during_a_short_backoff_rides_on_the_first_task() -> None:
    namespace = NamespaceFactory()
    request = kernel.StartRequest(workflow_id="soon", workflow_type="Report", task_queue="q", start_delay=1)
    run = WorkflowExecution.objects.get(run_id=kernel.start_workflow_execution(namespace, request).run_id)
    query = kernel.create_query(namespace, workflow_id="soon", run_id=None, query_type="state", query_args=[])
    assert query.buffered
    Shard.objects.update_or_create(shard_id=run.shard_id, defaults={"range_id": 1})
    backoff = TimerTask.objects.get(run=run, kind=TimerKind.WORKFLOW_BACKOFF)
    assert fire_timers(ShardFence(run.shard_id, 1), [(backoff.id, str(run.run_id))]) == 1
    task = poll_once(namespace, "q", "workflow", "test-worker")
    assert task is not None and str(query.id) in task["queries"]
