"""What each transaction costs PostgreSQL besides its own statements: the kernel's fixed
statements are prepared once per connection, and the pool hands out a connection without
a query to check it, while still replacing one the server dropped."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from django.db import connection

from chronicle.postgresql.base import check_pooled_connection
from history import kernel
from tests.conftest import database_conninfo
from tests.factories import NamespaceFactory

pytestmark = pytest.mark.django_db


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_the_kernels_statements_are_prepared_once_per_connection() -> None:
    namespace = NamespaceFactory()
    for i in range(3):
        kernel.start_workflow_execution(
            namespace, kernel.StartRequest(workflow_id=f"w{i}", workflow_type="T", task_queue="q")
        )

    prepared = _prepared_statements()
    inserts = [s for s in prepared if s.startswith('WITH w0 AS (INSERT INTO "history_workflowexecution"')]
    assert len(inserts) == 1, prepared  # three starts, one statement planned once


def _session(conn: psycopg.Connection[Any], watcher: psycopg.Connection[Any]) -> tuple[str, str] | None:
    row = watcher.execute(
        "SELECT query, state FROM pg_stat_activity WHERE pid = %s", [conn.info.backend_pid]
    ).fetchone()
    return None if row is None else (row[0], row[1])


def test_a_live_pooled_connection_is_handed_out_without_a_query(
    other_connection: psycopg.Connection[Any],
) -> None:
    with psycopg.connect(database_conninfo(), autocommit=True) as pooled:
        pooled.execute("SELECT 42")
        check_pooled_connection(pooled)
        assert _session(pooled, other_connection) == ("SELECT 42", "idle"), "the check sent nothing"


def test_a_connection_the_server_dropped_fails_the_check(other_connection: psycopg.Connection[Any]) -> None:
    with psycopg.connect(database_conninfo(), autocommit=True) as pooled:
        other_connection.execute("SELECT pg_terminate_backend(%s)", [pooled.info.backend_pid])
        deadline = time.monotonic() + 5
        while _session(pooled, other_connection) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(psycopg.OperationalError):
            check_pooled_connection(pooled)
