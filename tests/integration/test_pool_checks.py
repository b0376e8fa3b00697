"""The pool's hand-out check: a connection the server ended is replaced even when it was
returned a moment ago, and a healthy one in steady use goes out without a round trip."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection

from chronicle import pool_checks
from chronicle.db import listen_conninfo

pytestmark = pytest.mark.django_db(transaction=True)


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid: int = cursor.fetchone()[0]
    return pid


def test_the_backend_configures_the_pool_with_the_cheap_check() -> None:
    pool = connection.pool  # type: ignore[attr-defined]  # (the stubs predate Django's pool)
    assert pool is not None
    assert pool._check is pool_checks.check_pooled


def test_a_connection_ended_by_the_server_moments_after_its_return_is_replaced() -> None:
    first = _backend_pid()
    connection.close()  # back to the pool, just now
    with psycopg.connect(listen_conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [first])
    time.sleep(0.1)  # the server's goodbye reaches the idle connection's socket

    second = _backend_pid()  # no error: the check saw the goodbye and the pool replaced it

    assert second != first
    connection.close()


def _counting_statements(conn: psycopg.Connection[object]) -> list[str]:
    sent: list[str] = []
    original = conn.execute

    def execute(query: str, *args: object, **kwargs: object) -> object:
        sent.append(query)
        return original(query, *args, **kwargs)  # type: ignore[arg-type]

    conn.execute = execute  # type: ignore[method-assign, assignment]
    return sent


def test_a_healthy_connection_just_returned_is_not_queried() -> None:
    with psycopg.connect(listen_conninfo(), autocommit=True) as conn:
        sent = _counting_statements(conn)
        pool_checks.remember_return(conn)
        pool_checks.check_pooled(conn)
        assert sent == []


def test_a_connection_idle_past_the_limit_is_queried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_checks, "FULL_CHECK_AFTER_IDLE_SECONDS", 0.0)
    with psycopg.connect(listen_conninfo(), autocommit=True) as conn:
        sent = _counting_statements(conn)
        pool_checks.remember_return(conn)
        pool_checks.check_pooled(conn)
        assert sent == [""]


def test_a_dead_connection_fails_the_check() -> None:
    conn = psycopg.connect(listen_conninfo(), autocommit=True)
    pid = conn.info.backend_pid
    pool_checks.remember_return(conn)
    with psycopg.connect(listen_conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    time.sleep(0.1)
    with pytest.raises(psycopg.OperationalError):
        pool_checks.check_pooled(conn)
    conn.close()
