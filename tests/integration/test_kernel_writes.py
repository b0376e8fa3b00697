"""Kernel writes are whole or absent: signal dedup, gapless ids, rejected commands, limits."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode
from history import kernel
from history.kernel import ExecutionMutation, store
from history.kernel._mutation import save_all
from history.kernel.locks import lock_run, lock_runs
from history.models import HistoryEvent, PendingActivity, Task, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from namespaces.auth import access_namespace, api_key_from_header
from namespaces.models import ApiKey
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory, scope_of


def signal(execution: WorkflowExecution, **options: Any) -> None:
    kernel.signal_workflow_execution(
        execution.namespace,
        workflow_id=execution.workflow_id,
        run_id=None,
        signal_name="poke",
        input=[1],
        **options,
    )


def event_types(execution: WorkflowExecution) -> list[str]:
    return list(
        HistoryEvent.objects.filter(run=execution).order_by("event_id").values_list("event_type", flat=True)
    )


@pytest.mark.django_db
def test_a_retried_signal_with_the_same_request_id_is_recorded_once() -> None:
    execution = ExecutionFactory()
    signal(execution, request_id="sig-1")
    signal(execution, request_id="sig-1")
    signal(execution, request_id="sig-2")
    assert event_types(execution).count("WorkflowExecutionSignaled") == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_signals_get_gapless_event_ids() -> None:
    execution = ExecutionFactory()
    before = HistoryEvent.objects.filter(run=execution).count()
    senders, per_sender = 4, 5
    failures: list[BaseException] = []

    def send() -> None:
        try:
            for _ in range(per_sender):
                signal(execution)
        except BaseException as exc:  # surfaced by the assertion below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures
    ids = list(
        HistoryEvent.objects.filter(run=execution).order_by("event_id").values_list("event_id", flat=True)
    )
    assert ids == list(range(1, before + senders * per_sender + 1))
    execution.refresh_from_db()
    assert execution.next_event_id == ids[-1] + 1


@pytest.mark.django_db(transaction=True)
def test_a_timer_started_again_while_it_runs_fails_the_task() -> None:
    execution = ExecutionFactory()
    timer = {"command_type": "StartTimer", "attributes": {"timer_id": "t1", "start_to_fire_timeout": 60}}
    first = poll_once(execution.namespace, execution.task_queue, "workflow", "test-worker")
    assert first is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(first), task_token=first["task_token"], commands=[timer]
    )
    kernel.signal_workflow_execution(
        execution.namespace, workflow_id=execution.workflow_id, run_id=None, signal_name="s", input=[]
    )
    second = poll_once(execution.namespace, execution.task_queue, "workflow", "test-worker")
    assert second is not None

    kernel.respond_workflow_task_completed(
        scope=scope_of(second), task_token=second["task_token"], commands=[timer]
    )

    failed = HistoryEvent.objects.get(run=execution, event_type="WorkflowTaskFailed")
    assert failed.attributes["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_START_TIMER_DUPLICATE_ID"
    assert event_types(execution).count("TimerStarted") == 1
    assert TimerTask.objects.filter(run=execution, kind=TimerKind.USER_TIMER).count() == 1


@pytest.mark.django_db
def test_a_rejected_command_list_leaves_nothing_half_written() -> None:
    execution = ExecutionFactory()
    task = poll_once(execution.namespace, execution.task_queue, "workflow", "test-worker")
    assert task is not None
    history_before = event_types(execution)
    commands = [
        {"command_type": "StartTimer", "attributes": {"timer_id": "t1", "start_to_fire_timeout": 60}},
        {"command_type": "ScheduleActivityTask", "attributes": {"activity_id": "a1"}},  # no activity_type
    ]
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=commands
    )

    added = HistoryEvent.objects.filter(run=execution, event_id__gt=len(history_before)).order_by("event_id")
    assert [e.event_type for e in added][:1] == ["WorkflowTaskFailed"]
    assert added[0].attributes["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES"
    assert "TimerStarted" not in event_types(execution)
    assert "WorkflowTaskCompleted" not in event_types(execution)
    assert not TimerTask.objects.filter(run=execution, kind=TimerKind.USER_TIMER).exists()
    assert not PendingActivity.objects.filter(run=execution).exists()


@pytest.mark.django_db
def test_a_signal_past_the_payload_limit_is_refused_and_not_recorded() -> None:
    execution = ExecutionFactory(namespace=NamespaceFactory(payload_limit_bytes=1024))
    with pytest.raises(ChronicleError) as refused:
        kernel.signal_workflow_execution(
            execution.namespace,
            workflow_id=execution.workflow_id,
            run_id=None,
            signal_name="big",
            input=["x" * 2048],
        )
    assert refused.value.code == ErrorCode.PAYLOAD_TOO_LARGE
    assert "WorkflowExecutionSignaled" not in event_types(execution)


@pytest.mark.django_db
def test_a_start_past_the_payload_limit_creates_no_run() -> None:
    namespace = NamespaceFactory(payload_limit_bytes=1024)
    with pytest.raises(ChronicleError) as refused:
        ExecutionFactory(namespace=namespace, input=["x" * 2048])
    assert refused.value.code == ErrorCode.PAYLOAD_TOO_LARGE
    assert not WorkflowExecution.objects.filter(namespace=namespace).exists()
    assert not Task.objects.filter(namespace=namespace).exists()


@pytest.mark.django_db
def test_a_key_revoked_behind_the_cache_stops_working_within_its_ttl(settings: Any) -> None:
    settings.CHRONICLE_API_KEY_CACHE_SECONDS = 0.3
    issued = ApiKeyFactory()
    key = api_key_from_header(issued.authorization)
    assert access_namespace(key, issued.api_key.namespace.name, "client") == issued.api_key.namespace
    # A bulk UPDATE (like another process's revocation) sends no signal: the bound is the TTL.
    ApiKey.objects.filter(pk=issued.api_key.pk).update(revoked_at=timezone.now())
    time.sleep(0.35)
    with pytest.raises(ChronicleError) as refused:
        api_key_from_header(issued.authorization)
    assert refused.value.code == ErrorCode.UNAUTHENTICATED


@pytest.mark.django_db
def test_a_key_revoked_by_a_save_in_this_process_stops_working_at_once() -> None:
    issued = ApiKeyFactory()
    api_key_from_header(issued.authorization)
    issued.api_key.revoked_at = timezone.now()
    issued.api_key.save()
    with pytest.raises(ChronicleError) as refused:
        api_key_from_header(issued.authorization)
    assert refused.value.code == ErrorCode.UNAUTHENTICATED


@pytest.mark.django_db
def test_a_resolved_key_is_served_from_the_cache_without_a_query() -> None:
    issued = ApiKeyFactory()
    first = api_key_from_header(issued.authorization)
    with CaptureQueriesContext(connection) as queries:
        again = api_key_from_header(issued.authorization)
    assert again.pk == first.pk
    assert len(queries) == 0


@pytest.mark.django_db
def test_a_key_of_another_namespace_sees_not_found() -> None:
    issued = ApiKeyFactory()
    other = NamespaceFactory()
    with pytest.raises(ChronicleError) as refused:
        access_namespace(api_key_from_header(issued.authorization), other.name, "client")
    assert refused.value.code == ErrorCode.NOT_FOUND


@pytest.mark.django_db
def test_a_retried_signal_with_start_starts_and_signals_once() -> None:
    namespace = NamespaceFactory()
    request = kernel.StartRequest(workflow_id="sws", workflow_type="T", task_queue="q", request_id="sws-1")
    first = kernel.start_workflow_execution(namespace, request, signal=("poke", [1], "sws-1"))
    again = kernel.start_workflow_execution(namespace, request, signal=("poke", [1], "sws-1"))
    assert again.run_id == first.run_id
    execution = WorkflowExecution.objects.get(namespace=namespace, workflow_id="sws")
    assert event_types(execution).count("WorkflowExecutionSignaled") == 1


@pytest.mark.django_db
def test_an_over_long_text_value_is_refused_whole_not_cut_short() -> None:
    execution = ExecutionFactory()
    before = event_types(execution)
    with pytest.raises(DataError), transaction.atomic(durable=False):
        mutation = ExecutionMutation(lock_run(execution.run_id), execution.namespace)
        mutation.append("E" * 65, {})  # the column holds 64
        mutation.save()

    assert event_types(execution) == before


@pytest.mark.django_db
def test_a_kernel_write_is_one_statement_that_sets_the_new_rows_ids() -> None:
    execution = ExecutionFactory()
    mutation = ExecutionMutation(lock_run(execution.run_id), execution.namespace)
    mutation.append("WorkflowExecutionSignaled", {"signal_name": "a"})
    mutation.append("WorkflowExecutionSignaled", {"signal_name": "b", "input": [{"nested": [1, "x"]}]})
    mutation.add_timer(TimerKind.USER_TIMER, mutation.now, timer_id="t1", scheduled_event_id=5)
    events, timers = list(mutation._events), list(mutation._timers)
    with CaptureQueriesContext(connection) as queries:
        mutation.save()

    assert len(queries.captured_queries) == 1
    sql = queries.captured_queries[0]["sql"]
    for part in ('UPDATE "history_workflowexecution"', 'INSERT INTO "history_historyevent"', "pg_notify"):
        assert sql.count(part) == 1, part
    stored = HistoryEvent.objects.filter(run=execution).order_by("-event_id")[:2]
    assert sorted(e.pk for e in events) == sorted(e.pk for e in stored)
    assert [t.pk for t in timers] == list(
        TimerTask.objects.filter(run=execution, timer_id="t1").values_list("pk", flat=True)
    )
    assert not any(row._state.adding for row in [*events, *timers])
    assert stored[0].attributes == {"signal_name": "b", "input": [{"nested": [1, "x"]}]}


@pytest.mark.django_db
def test_a_start_writes_its_run_events_and_task_in_one_statement() -> None:
    namespace = NamespaceFactory()
    with CaptureQueriesContext(connection) as queries:
        result = kernel.start_workflow_execution(namespace, kernel.StartRequest("one-write", "T", "q"))

    writes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith(("WITH", "INSERT", "UPDATE"))]
    assert len(writes) == 1
    assert (
        'INSERT INTO "history_workflowexecution"' in writes[0] and 'INSERT INTO "history_task"' in writes[0]
    )
    execution = WorkflowExecution.objects.get(run_id=result.run_id)
    assert event_types(execution) == ["WorkflowExecutionStarted", "WorkflowTaskScheduled"]
    assert Task.objects.filter(run_id=execution.run_id).count() == 1


@pytest.mark.django_db
def test_a_write_of_many_rows_sends_them_as_json_and_keeps_their_order_and_ids() -> None:
    """Past a few rows a part goes as one JSON array of rows: the text no longer grows with
    the rows, and the serial ids still rise in the order the rows were appended."""
    execution = ExecutionFactory()
    mutation = ExecutionMutation(lock_run(execution.run_id), execution.namespace)
    names = [f"s{i}" for i in range(store.FEW_ROWS * 5)]
    for name in names:
        mutation.append("WorkflowExecutionSignaled", {"signal_name": name, "input": [{"n": name}]})
    events = list(mutation._events)
    with CaptureQueriesContext(connection) as queries:
        mutation.save()

    [write] = queries.captured_queries
    assert "jsonb_array_elements(" in write["sql"] and "s7" not in write["sql"]
    stored = list(HistoryEvent.objects.filter(run=execution, event_type="WorkflowExecutionSignaled"))
    stored.sort(key=lambda e: e.event_id)
    assert [e.attributes["signal_name"] for e in stored] == names
    assert [e.pk for e in events] == [e.pk for e in stored]
    assert sorted(e.pk for e in stored) == [e.pk for e in stored]


@pytest.mark.django_db
def test_many_runs_written_together_get_each_its_own_columns() -> None:
    executions = [ExecutionFactory() for _ in range(store.FEW_ROWS + 3)]
    mutations = [ExecutionMutation(lock_run(e.run_id), e.namespace) for e in executions]
    for i, mutation in enumerate(mutations):
        mutation.execution.memo = {"i": i}
        mutation.append("WorkflowExecutionSignaled", {"signal_name": f"run{i}"})
    with CaptureQueriesContext(connection) as queries:
        save_all(mutations)

    [write] = queries.captured_queries
    assert 'UPDATE "history_workflowexecution" AS t' in write["sql"]
    assert "jsonb_array_elements(" in write["sql"]

    for i, execution in enumerate(executions):
        execution.refresh_from_db()
        assert execution.memo == {"i": i}
        assert event_types(execution)[-1] == "WorkflowExecutionSignaled"
        assert execution.next_event_id == mutations[i].execution.next_event_id


@pytest.mark.django_db
def test_rows_sent_as_json_come_back_as_they_were() -> None:
    """Every kind of value a batch carries survives the JSON form: quotes, backslashes and
    non-ASCII text, JSON scalars and nesting, integers past 64 bits, a JSON column's None as
    SQL NULL, floats, times to the microsecond, on a whole second and in another zone, ids."""
    executions = [ExecutionFactory() for _ in range(store.FEW_ROWS + 2)]
    mutations = [ExecutionMutation(lock_run(e.run_id), e.namespace) for e in executions]
    awkward = ['say "hi"', "back\\slash", "tab\there", "ünïcødé ✓", "", "{not json}"]
    elsewhere = timezone.get_fixed_timezone(330)
    times = [timezone.now(), timezone.now().replace(microsecond=0), timezone.now().astimezone(elsewhere)]
    for i, (text, mutation) in enumerate(zip(awkward, mutations, strict=True)):
        ex = mutation.execution
        ex.memo = {"text": text, "nested": [1, 2.5, None, {"k": text}], "big": 2**70 + i}
        ex.search_attributes = {}
        ex.result = text
        ex.failure = None
        ex.cancel_requested = not ex.cancel_requested
        ex.run_timeout = 0.1 + len(text) / 3
        ex.close_time = times[i % len(times)]
        mutation.append("WorkflowExecutionSignaled", {"signal_name": text, "input": text})
    save_all(mutations)

    for i, (text, mutation) in enumerate(zip(awkward, mutations, strict=True)):
        written = mutation.execution
        stored = WorkflowExecution.objects.get(run_id=written.run_id)
        assert stored.memo == {"text": text, "nested": [1, 2.5, None, {"k": text}], "big": 2**70 + i}
        assert stored.result == text and stored.failure is None
        assert WorkflowExecution.objects.filter(run_id=written.run_id, failure__isnull=True).exists()
        assert stored.cancel_requested == written.cancel_requested
        assert stored.run_timeout == written.run_timeout
        assert stored.close_time == written.close_time
        signal = HistoryEvent.objects.get(run_id=written.run_id, event_type="WorkflowExecutionSignaled")
        assert signal.attributes == {"signal_name": text, "input": text}


@pytest.mark.django_db
def test_a_json_column_changed_in_place_deep_inside_is_written() -> None:
    """A locked run keeps a copy of its JSON columns: a change made inside a nested value
    is a change of the column, written back."""
    execution = ExecutionFactory(memo={"order": {"lines": [{"sku": "a"}]}})
    with transaction.atomic():
        run = lock_run(execution.run_id)
        run.memo["order"]["lines"][0]["sku"] = "b"
        write = store.Write()
        store.update_changed_columns(write, run)
        assert write.parts, "the nested change was not seen"
        store.send(write)
    assert WorkflowExecution.objects.get(pk=execution.pk).memo == {"order": {"lines": [{"sku": "b"}]}}


@pytest.mark.django_db(transaction=True)
def test_runs_locked_together_share_their_namespace_and_keep_their_own() -> None:
    """A batch's runs of one namespace get one instance of it, read with them; a run of
    another namespace gets its own, and each run still holds its own columns."""
    home, other = NamespaceFactory(), NamespaceFactory()
    runs = [ExecutionFactory(namespace=namespace) for namespace in (home, home, other)]
    with transaction.atomic():
        locked = lock_runs([r.run_id for r in runs], {r.shard_id for r in runs})
    first, second, third = (locked[r.run_id] for r in runs)
    assert first.namespace is second.namespace and first.namespace.name == home.name
    assert third.namespace is not first.namespace and third.namespace.name == other.name
    assert [first.workflow_id, second.workflow_id, third.workflow_id] == [r.workflow_id for r in runs]
    assert {first.namespace_id, third.namespace_id} == {home.id, other.id}
