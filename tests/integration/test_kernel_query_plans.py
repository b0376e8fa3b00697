"""The hot queries have indexes that serve them.

Each test captures the exact SQL the code issues, then asks PostgreSQL for its plan
with sequential scans disabled: if no index can serve the query the planner still
falls back to a sequential scan, and the test names the index it expected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from executions import selectors
from history.kernel import ExecutionMutation
from history.kernel._mutation import save_all
from history.kernel.locks import lock_runs
from history.kernel.responses import histories_after
from history.models import WorkflowExecution
from history.shard_owner import ShardOwner
from history.vocabulary import EventType
from matching.dispatch import poll_once
from tests.factories import ExecutionFactory

pytestmark = pytest.mark.django_db


def captured_sql(action: Callable[[], Any], marker: str) -> str:
    """Run ``action`` and return the one query it issued whose SQL contains ``marker``, its
    parameters written in (the kernel binds them apart from the text, so what Django logs
    holds ``$1`` placeholders, which ``EXPLAIN`` cannot take)."""
    issued: list[tuple[str, Any]] = []

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        issued.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        action()
    matching = [(sql, params) for sql, params in issued if marker in sql]
    assert len(matching) == 1, [sql for sql, _ in issued]
    sql, params = matching[0]
    return connection.ops.compose_sql(sql, params)  # type: ignore[attr-defined]


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def plan_without_seqscans(sql: str) -> list[dict[str, Any]]:
    """The nodes of PostgreSQL's plan for ``sql`` with sequential scans off; none may be one.

    The hot tables are analysed first, so the plan follows this test's rows and not the
    row counts an earlier test's ANALYZE left in ``pg_class`` (those survive a rollback).
    """
    with connection.cursor() as cursor:
        for table in ("history_task", "history_workflowexecution", "history_timertask"):
            cursor.execute(f"ANALYZE {table}")
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
            (document,) = cursor.fetchone()
        finally:
            cursor.execute("RESET enable_seqscan")
    nodes = list(plan_nodes(document[0]["Plan"]))
    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], nodes
    return nodes


def indexes_used(sql: str) -> set[str]:
    """The indexes PostgreSQL's plan for ``sql`` reads, with sequential scans off."""
    return {n["Index Name"] for n in plan_without_seqscans(sql) if "Index Name" in n}


def test_history_page_reads_the_per_run_event_index() -> None:
    execution = ExecutionFactory()
    sql = captured_sql(
        lambda: selectors.history_page(execution, after_event_id=1, page_size=50), "history_historyevent"
    )
    assert "uniq_event_per_run" in indexes_used(sql)


def fill_other_queues(execution: WorkflowExecution, count: int = 5_000) -> None:
    """Task rows on the run's namespace's other queues: on a table of a few rows any plan goes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO history_task (namespace_id, task_queue, kind, run_id, shard_id, "
            "scheduled_event_id, attempt, visible_at, created_at, build_id) "
            "SELECT %s, 'other-' || (i %% 50), 'workflow', %s, 0, 0, 1, now(), now(), '' "
            "FROM generate_series(1, %s) AS g(i)",
            [execution.namespace_id, execution.run_id, count],
        )


def test_task_claim_reads_the_dispatch_index_and_skips_locked_rows() -> None:
    execution = ExecutionFactory()
    fill_other_queues(execution)
    sql = captured_sql(
        lambda: poll_once(execution.namespace, execution.task_queue, "workflow", "test-worker"), "SKIP LOCKED"
    )
    assert "task_dispatch_build" in indexes_used(sql)


def test_due_timer_scan_reads_the_shard_fire_at_index() -> None:
    owner = ShardOwner("plan-check")
    owner.owned = {0: 1}
    owner.next_fire = {0: timezone.now() - timedelta(seconds=1)}  # claims a due timer; none is
    scan = captured_sql(owner.fire_due_timers, "ORDER BY fire_at LIMIT")
    assert "timer_due" in indexes_used(scan)


def test_next_fire_lookup_reads_the_shard_fire_at_index() -> None:
    owner = ShardOwner("plan-check")
    owner.owned = {0: 1, 1: 1}
    lookup = captured_sql(owner.refresh_next_fire, "min(fire_at)")
    assert "timer_due" in indexes_used(lookup)


def plan_seq_scans(sql: str, table: str) -> list[dict[str, Any]]:
    """The sequential scans of ``table`` in PostgreSQL's own choice of plan for ``sql``
    (sequential scans allowed, the tables analysed with this test's rows)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        (document,) = cursor.fetchone()
    nodes = plan_nodes(document[0]["Plan"])
    return [n for n in nodes if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == table]


@contextmanager
def rows_of_other_runs(table: str, columns: str, values: str, count: int = 3_000) -> Iterator[None]:
    """Rows of runs that are not the test's, for the test's duration: a table of a few
    thousand rows, where matching a batch's runs against the whole array made the planner
    scan it all. They name no run, so they are gone before the test's end checks the
    foreign keys."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) "
            f"SELECT {values} FROM generate_series(1, %s) AS g(i) RETURNING id",
            [count],
        )
        ids = [row[0] for row in cursor.fetchall()]
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", [ids])


def test_a_close_of_many_runs_finds_their_timers_run_by_run() -> None:
    runs = [ExecutionFactory() for _ in range(32)]

    def close_all() -> None:
        with transaction.atomic():
            locked = lock_runs([r.run_id for r in runs], [r.shard_id for r in runs])
            mutations = [ExecutionMutation(ex, ex.namespace) for ex in locked.values()]
            for m in mutations:
                m.close("Completed", EventType.WORKFLOW_EXECUTION_COMPLETED, {"result": None})
            save_all(mutations)

    sql = captured_sql(close_all, "DELETE FROM history_timertask")
    with rows_of_other_runs(
        "history_timertask",
        "run_id, shard_id, kind, fire_at, timer_id, scheduled_event_id, attempt, timeout_type, failures",
        "gen_random_uuid(), i %% 16, 'user', now() + interval '1 day', 't', 1, 1, '', 0",
    ):
        assert plan_seq_scans(sql, "history_timertask") == []


def test_a_burst_reads_each_runs_history_through_the_run_event_index() -> None:
    runs = [ExecutionFactory() for _ in range(16)]
    sql = captured_sql(lambda: histories_after([(ex, 0) for ex in runs]), "unnest(")
    with rows_of_other_runs(
        "history_historyevent",
        "run_id, shard_id, event_id, event_type, event_time, attributes",
        "gen_random_uuid(), i %% 16, 1, 'WorkflowExecutionStarted', now(), '{}'::jsonb",
    ):
        assert plan_seq_scans(sql, "history_historyevent") == []
