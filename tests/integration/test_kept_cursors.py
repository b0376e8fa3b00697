"""The kernel's statements run on cursors kept per connection and statement text
(``history.kernel.cursors``): a statement's second run finds its adaptation context ready,
its results go at the end of its block, and an error leaves the cursors usable."""

from __future__ import annotations

import gc
import weakref
from datetime import UTC
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from psycopg import pq

from history.kernel import cursors, store
from history.kernel.locks import lock_run
from history.models import WorkflowExecution
from tests.conftest import database_conninfo
from tests.factories import ExecutionFactory

pytestmark = pytest.mark.django_db

_READ = "SELECT run_id, status, start_time FROM history_workflowexecution WHERE run_id = %s"


def _kept() -> cursors.StatementCursors:
    connection.ensure_connection()
    return cursors._statement_cursors(connection.connection)


def test_a_statement_runs_again_on_its_cursor_and_keeps_its_loaders() -> None:
    run = ExecutionFactory()
    with store.bound_cursor() as cursor:
        cursor.execute(_READ, [run.run_id])
        first = cursor.fetchone()
    kept = _kept()._by_text[_READ]
    context = kept._tx
    with store.bound_cursor() as cursor:
        cursor.execute(_READ, [run.run_id])
        assert cursor.fetchone() == first
    assert _kept()._by_text[_READ] is kept
    assert kept._tx is context  # psycopg kept its loaders and dumpers


def test_statements_of_other_texts_get_their_own_cursors() -> None:
    run = ExecutionFactory()
    with store.bound_cursor() as cursor:
        cursor.execute(_READ, [run.run_id])
        cursor.execute("SELECT %s::int + 1", [41])
        assert cursor.fetchone() == (42,)
    assert _kept()._by_text[_READ] is not _kept()._by_text["SELECT %s::int + 1"]


def test_the_end_of_a_block_drops_the_results_not_the_cursor() -> None:
    run = ExecutionFactory()
    with store.bound_cursor() as cursor:
        cursor.execute(_READ, [run.run_id])
    kept = _kept()._by_text[_READ]
    assert kept.pgresult is None and not kept.closed
    with pytest.raises(psycopg.InterfaceError):
        store.bound_cursor().fetchone()  # nothing ran on it since


def test_a_failed_statement_leaves_the_cursors_usable() -> None:
    run = ExecutionFactory()
    with (
        pytest.raises(Exception, match="division by zero"),
        transaction.atomic(),
        store.bound_cursor() as cursor,
    ):
        cursor.execute("SELECT 1 / %s::int", [0])
    with transaction.atomic():
        locked = lock_run(run.run_id, run.shard_id)
    assert locked.run_id == run.run_id


def test_two_cursors_open_at_once_read_their_own_results() -> None:
    run = ExecutionFactory()
    with store.bound_cursor() as outer:
        outer.execute(_READ, [run.run_id])
        with store.bound_cursor() as inner:
            inner.execute("SELECT %s::int + 1", [41])
            assert inner.fetchone() == (42,)
        assert outer.fetchone()[0] == run.run_id


def test_each_connection_keeps_its_own_cursors(other_connection: psycopg.Connection[Any]) -> None:
    assert cursors._statement_cursors(other_connection) is not _kept()
    assert cursors._statement_cursors(other_connection) is cursors._statement_cursors(other_connection)


def test_the_run_lock_reads_the_same_run_twice() -> None:
    run = ExecutionFactory()
    with transaction.atomic():
        first = lock_run(run.run_id, run.shard_id)
    with transaction.atomic():
        second = lock_run(run.run_id, run.shard_id)
    assert first.run_id == second.run_id == run.run_id
    assert second.start_time == WorkflowExecution.objects.get(run_id=run.run_id).start_time


def test_kept_cursors_go_with_their_connection(django_db_setup: Any) -> None:
    """A connection closed and dropped (an outage, the pool replacing it) is collected with
    its cursors: nothing keeps dead connections alive."""
    conn: psycopg.Connection[Any] = psycopg.connect(database_conninfo())
    cursors._statement_cursors(conn).cursor_for("SELECT %s::int").execute("SELECT %s::int", [1])
    gone = weakref.ref(conn)
    conn.close()
    del conn
    gc.collect()
    assert gone() is None


def test_timestamps_come_back_through_the_compiled_loader_as_the_orm_reads_them() -> None:
    run = ExecutionFactory()
    with store.bound_cursor() as cursor:
        cursor.execute(_READ, [run.run_id])
        row = cursor.fetchone()
    start_time = row[2]
    assert start_time == WorkflowExecution.objects.get(pk=run.pk).start_time
    assert start_time.tzinfo is UTC
    loader = _kept()._by_text[_READ].adapters.get_loader(cursors._TIMESTAMPTZ_OID, pq.Format.TEXT)
    assert loader is psycopg.adapters.get_loader(cursors._TIMESTAMPTZ_OID, pq.Format.TEXT)
    assert loader.__module__ == "psycopg_binary._psycopg"  # not Django's Python subclass
