"""The hot queries have indexes that serve them.

Each test captures the exact SQL the code issues, then asks PostgreSQL for its plan
with sequential scans disabled: if no index can serve the query the planner still
falls back to a sequential scan, and the test names the index it expected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from executions import selectors
from history.shard_owner import ShardOwner
from matching.dispatch import poll_once
from tests.factories import ExecutionFactory

pytestmark = pytest.mark.django_db


def captured_sql(action: Callable[[], Any], marker: str) -> str:
    """Run ``action`` and return the one query it issued whose SQL contains ``marker``."""
    with CaptureQueriesContext(connection) as captured:
        action()
    matching = [q["sql"] for q in captured.captured_queries if marker in q["sql"]]
    assert len(matching) == 1, [q["sql"] for q in captured.captured_queries]
    return matching[0]


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def plan_without_seqscans(sql: str) -> list[dict[str, Any]]:
    """The nodes of PostgreSQL's plan for ``sql`` with sequential scans off; none may be one."""
    with connection.cursor() as cursor:
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


def test_task_claim_reads_the_dispatch_index_and_skips_locked_rows() -> None:
    execution = ExecutionFactory()
    sql = captured_sql(
        lambda: poll_once(execution.namespace, execution.task_queue, "workflow", "test-worker"), "SKIP LOCKED"
    )
    assert "task_dispatch_build" in indexes_used(sql)


def test_due_timer_scan_reads_the_shard_fire_at_index() -> None:
    owner = ShardOwner("plan-check")
    owner.owned = {0: 1}
    owner.next_fire = {0: timezone.now() - timedelta(seconds=1)}  # claims a due timer; none is
    scan = captured_sql(owner.fire_due_timers, '"history_timertask"."fire_at" <=')
    assert "timer_due" in indexes_used(scan)


def test_next_fire_lookup_reads_the_shard_fire_at_index() -> None:
    owner = ShardOwner("plan-check")
    owner.owned = {0: 1, 1: 1}
    lookup = captured_sql(owner.refresh_next_fire, "min(fire_at)")
    assert "timer_due" in indexes_used(lookup)
