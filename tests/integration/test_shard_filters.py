"""The schema and the kernel's statements are ready for a distributed PostgreSQL (Citus).

Every table whose rows belong to one run carries ``shard_id``, the column such a database
distributes them by (docs/scale-out.md), and every statement the kernel, matching and the
shard owner send that touches one of those tables names the shard of the rows it touches,
so it can go to the one node that holds them. A statement that cannot is on one of two
lists below: ``CROSS_SHARD_BY_DESIGN`` (with the reason, and what a distributed layout does
about it) or ``PENDING`` (a fix known and not made yet, with the line to change).

The statements are the real ones: a representative scenario (``shard_scenario``) runs
against PostgreSQL with every statement of Django's connection captured, and a small
reader (``shard_sql``) judges each. The same capture gives the transactions that touch
rows of two shards, checked against ``CROSS_SHARD_TRANSACTIONS``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pytest
from django.db import connection

from tests.integration import shard_scenario
from tests.integration.shard_sql import Recorder, Statement, Touch, per_execution_tables, touches


@dataclass(frozen=True)
class Known:
    """A statement the rule allows, by the table, who sends it and a piece of its text."""

    table: str
    site: str
    marker: str
    why: str

    def covers(self, statement: Statement, touch: Touch) -> bool:
        return touch.table == self.table and self.site in statement.site and self.marker in statement.sql


CROSS_SHARD_BY_DESIGN = [
    Known(
        "history_task",
        "matching/dispatch.py:_take_next",
        "FOR UPDATE SKIP LOCKED",
        "matching claims the oldest task of a queue, and a task queue spans every shard: on a "
        "distributed layout the task table is distributed by queue, not by run (docs/scale-out.md)",
    ),
    Known(
        "history_task",
        "matching/dispatch.py:_take_sticky_fallback",
        "t.task_queue = r.sticky_task_queue",
        "the normal queue's poll takes a sticky task whose poller is gone: a claim by queue, as above",
    ),
    Known(
        "history_payloadreference",
        "history/kernel/payloads.py:collect_unreferenced",
        "NOT EXISTS",
        "collecting a payload no run refers to asks every run of the namespace (the payload store "
        "is per namespace, shared by runs of every shard); housekeeping, once a minute",
    ),
    Known(
        "history_workflowexecution",
        "executions/visibility.py",
        "",
        "the visibility list pages through a namespace's runs on every shard by design",
    ),
]

# Statements known to break the rule, each with its fix, until it is made: none now.
PENDING: list[Known] = []


@dataclass(frozen=True)
class CrossShard:
    """A step of the scenario whose transaction touches rows of several shards."""

    step: str
    parties: tuple[str, ...]
    why: str


CROSS_SHARD_TRANSACTIONS = [
    CrossShard(
        "workflow task batch poll",
        ("batch-a", "batch-b"),
        "a batch poll starts the tasks it claimed (of runs on any shard) in one transaction",
    ),
    CrossShard(
        "timers due on two shards",
        ("parent", "target"),
        "the shard owner fires a batch of due timers of all the shards it owns in one transaction",
    ),
    CrossShard(
        "child continues as new",
        ("orphan", "parent"),
        "the child's next run reads its parent's pending-child row for the initiated event id",
    ),
    CrossShard(
        "reset",
        ("parent", "orphan"),
        "a reset looks whether each child it takes over has closed meanwhile (the child's runs)",
    ),
    CrossShard(
        "schedule triggered, starting a run",
        ("schedule", "scheduled run"),
        "a schedule's trigger (or firing) starts its run in the schedule's own transaction",
    ),
    CrossShard(
        "schedule fires, looking at its running run",
        ("schedule", "scheduled run"),
        "a schedule's firing reads the status of the runs it started, in the schedule's transaction",
    ),
    CrossShard(
        "scheduled run closes, its schedule is woken",
        ("scheduled run", "schedule"),
        "a scheduled run's close adds its schedule's timer row, on the schedule's shard",
    ),
    CrossShard(
        "retention",
        ("parent", "kid"),
        "the owner's batch of due timers (here retention deleting closed runs) spans its shards",
    ),
]


@functools.cache
def captured() -> tuple[shard_scenario.Scenario, tuple[Statement, ...]]:
    """The scenario's statements, run once for the tests of this module."""
    recorder = Recorder()
    with connection.execute_wrapper(recorder):
        scenario = shard_scenario.run(recorder)
    return scenario, tuple(recorder.statements)


def _describe(statement: Statement, touch: Touch) -> str:
    return f"[{statement.step}] {touch.verb} {touch.table} from {statement.site}:\n    {statement.sql[:300]}"


@pytest.mark.django_db(transaction=True)
def test_every_per_execution_table_has_a_not_null_shard_column() -> None:
    tables = per_execution_tables()
    assert {"history_workflowexecution", "history_historyevent", "history_task"} <= set(tables)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, is_nullable FROM information_schema.columns "
            "WHERE column_name = 'shard_id' AND table_name = ANY(%s)",
            [list(tables)],
        )
        columns = dict(cursor.fetchall())
    assert {table: columns.get(table) for table in tables} == dict.fromkeys(tables, "NO")


@pytest.mark.django_db(transaction=True)
def test_every_statement_on_a_run_table_names_the_shard() -> None:
    _, statements = captured()
    tables = per_execution_tables()
    unexplained: list[str] = []
    used: set[Known] = set()
    checked = 0
    for statement in statements:
        for touch in touches(statement.sql, statement.params, tables):
            checked += 1
            if touch.confined:
                continue
            known = [k for k in (*CROSS_SHARD_BY_DESIGN, *PENDING) if k.covers(statement, touch)]
            used.update(known)
            if not known:
                unexplained.append(_describe(statement, touch))
    assert checked > 300, checked  # the scenario reached the kernel's writes and reads
    assert not unexplained, "statements without a shard filter:\n" + "\n".join(unexplained)
    # A listed statement the scenario no longer sends is fixed (or gone): take it off its list.
    assert [k for k in (*CROSS_SHARD_BY_DESIGN, *PENDING) if k not in used] == []


@pytest.mark.django_db(transaction=True)
def test_the_transactions_across_shards_are_the_listed_ones() -> None:
    scenario, statements = captured()
    tables = per_execution_tables()
    shards_of: dict[int, set[int]] = {}
    step_of: dict[int, str] = {}
    for statement in statements:
        step_of.setdefault(statement.transaction, statement.step)
        found = shards_of.setdefault(statement.transaction, set())
        for touch in touches(statement.sql, statement.params, tables):
            found.update(touch.shards)
    across = {step_of[t] for t, shards in shards_of.items() if len(shards) > 1}
    expected = {c.step for c in CROSS_SHARD_TRANSACTIONS if len({scenario.shards[p] for p in c.parties}) > 1}
    assert sorted(across - expected) == [], "across shards, not listed"
    assert sorted(expected - across) == [], "listed, not across shards"
    # The steps of the scenario that span no two shards do not reach this list by accident.
    assert len({s.step for s in statements}) > len(expected) + 15


@pytest.mark.parametrize(
    ("sql", "confined"),
    [
        ('SELECT 1 FROM "history_task" WHERE ("history_task"."run_id" = %s)', False),
        (
            'SELECT 1 FROM "history_task" WHERE ("history_task"."run_id" = %s'
            ' AND "history_task"."shard_id" = 3)',
            True,
        ),
        ("UPDATE history_pendingactivity SET shard_id = %s WHERE id = %s", False),
        (
            "DELETE FROM history_task WHERE shard_id = ANY(%s) AND id IN (SELECT id FROM history_task t)",
            False,
        ),
        ("SELECT 1 FROM history_workflowexecution e WHERE e.run_id = %s AND x.shard_id = %s", False),
        ("SELECT 1 FROM history_workflowexecution e WHERE e.run_id = %s AND e.shard_id = %s", True),
        ('INSERT INTO "history_signalrequest" ("run_id", "request_id") VALUES (%s, %s)', False),
    ],
)
def test_the_reader_tells_a_confined_statement_from_one_that_is_not(sql: str, confined: bool) -> None:
    tables = {"history_task", "history_pendingactivity", "history_workflowexecution", "history_signalrequest"}
    assert all(t.confined for t in touches(sql, None, tables)) is confined
