"""PostgreSQL's protective timeouts per process role, and the durable-commit check.

A paused process holding a run's row lock must not stall every request needing the run:
with the frontend's ``lock_timeout`` the request gets a 503 to retry, within the bound,
and nothing is written; once the lock goes, the same call succeeds. The role comes from
``CHRONICLE_DB_ROLE`` when the process starts; a database with ``synchronous_commit``
off is refused, since a 2xx promises the write is durable.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, connection

from chronicle import db
from history.models import HistoryEvent, WorkflowExecution
from tests.asgi_client import asgi_post
from tests.conftest import ROOT, database_url
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUTS = {"lock_timeout": "700ms", "statement_timeout": "2s", "idle_in_transaction_session_timeout": "10s"}


@pytest.fixture
def protected() -> Iterator[None]:
    db.protect_connections(TIMEOUTS)
    connection.close()  # the next query checks a connection out again, and sets it
    yield
    db.protect_connections(None)
    connection.close_pool()  # the pooled connections keep their session settings: drop them


def test_each_connection_gets_the_timeouts(protected: None) -> None:
    with connection.cursor() as cursor:
        for name, value in TIMEOUTS.items():
            cursor.execute(f"SHOW {name}")
            assert cursor.fetchone() == (value,)


def test_a_statement_past_its_bound_is_cancelled(protected: None) -> None:
    began = time.monotonic()
    with pytest.raises(OperationalError, match="statement timeout"), connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(10)")
    assert time.monotonic() - began < 5


def test_a_lock_held_by_a_stalled_process_is_a_fast_503_then_the_call_goes_through(
    protected: None, other_connection: psycopg.Connection[Any]
) -> None:
    namespace = NamespaceFactory()
    authorization = ApiKeyFactory(namespace=namespace).authorization
    run = ExecutionFactory(namespace=namespace, workflow_id="held")
    events = HistoryEvent.objects.filter(run=run).count()
    signal = f"/api/v1/namespaces/{namespace.name}/workflows/held/signal"
    table = WorkflowExecution._meta.db_table
    with other_connection.transaction():  # the stalled process: it holds the run's row and waits
        other_connection.execute(f"SELECT 1 FROM {table} WHERE run_id = %s FOR UPDATE", [run.run_id])
        began = time.monotonic()
        answer = asgi_post(signal, {"signal_name": "go"}, authorization=authorization)
        took = time.monotonic() - began
    assert answer.status_code == 503, answer.content[:300]
    assert answer.json()["code"] == "unavailable" and int(answer["retry-after"]) >= 1
    assert took < 4, took
    assert HistoryEvent.objects.filter(run=run).count() == events
    assert asgi_post(signal, {"signal_name": "go"}, authorization=authorization).status_code == 200
    assert HistoryEvent.objects.filter(run=run).count() > events


def test_a_database_with_synchronous_commit_off_is_refused(other_connection: psycopg.Connection[Any]) -> None:
    name = connection.settings_dict["NAME"]
    other_connection.autocommit = True
    other_connection.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    db.protect_connections(TIMEOUTS)
    try:
        connection.close()
        connection.close_pool()  # new sessions read the database's setting
        with pytest.raises(ImproperlyConfigured, match="synchronous_commit is off"):
            connection.ensure_connection()
    finally:
        other_connection.execute(f'ALTER DATABASE "{name}" RESET synchronous_commit')
        db.protect_connections(None)
        connection.close()
        connection.close_pool()


@pytest.mark.parametrize(("role", "lock_timeout"), [("frontend", "5s"), ("daemon", "10s"), ("", "0")])
def test_the_process_role_picks_the_timeouts_at_start(role: str, lock_timeout: str) -> None:
    shown = _show_in_a_new_process(role, "lock_timeout")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.strip().splitlines()[-1] == lock_timeout


def test_an_unknown_role_stops_the_process_at_start() -> None:
    shown = _show_in_a_new_process("frontdoor", "lock_timeout")
    assert shown.returncode != 0
    assert "CHRONICLE_DB_ROLE='frontdoor': use one of frontend, daemon" in shown.stderr


@pytest.mark.parametrize(("role", "lock_timeout"), [("", "10s"), ("frontend", "5s")])
def test_a_daemon_protects_itself_unless_the_role_is_named(role: str, lock_timeout: str) -> None:
    """The daemons' commands call ``protect_as("daemon")`` as they start: a deployment that
    sets no role still has the bounds, and one that names a role keeps it."""
    shown = _show_in_a_new_process(
        role, "lock_timeout", first="from chronicle import db; db.protect_as('daemon')"
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.strip().splitlines()[-1] == lock_timeout


@pytest.mark.parametrize(("role", "expected"), [("", "frontend"), ("daemon", "daemon")])
def test_gunicorns_config_names_the_frontend_role_unless_one_is_named(
    role: str, expected: str, tmp_path: Path
) -> None:
    config = "platform/gunicorn.conf.py"
    code = f"import os, runpy; runpy.run_path({config!r}); print(os.environ[{db.ROLE_VARIABLE!r}])"
    env = {k: v for k, v in os.environ.items() if k != db.ROLE_VARIABLE}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path)  # else the config makes a folder of its own
    if role:
        env[db.ROLE_VARIABLE] = role
    shown = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.strip().splitlines()[-1] == expected


def _show_in_a_new_process(role: str, setting: str, *, first: str = "") -> subprocess.CompletedProcess[str]:
    code = (
        f"{first}\n"
        "from django.db import connection\n"
        "with connection.cursor() as cursor:\n"
        f"    cursor.execute('SHOW {setting}')\n"
        "    print(cursor.fetchone()[0])\n"
    )
    env = {**os.environ, "DATABASE_URL": database_url(), db.ROLE_VARIABLE: role}
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_connections_run_out_is_a_503_and_the_pool_waits_its_full_timeout_again_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pooled connection taken (a burst, a leak): a call waits the pool's timeout,
    then gets a 503 with Retry-After, not a 500; once a connection is back, calls work and
    the pool waits its own timeout again."""
    namespace = NamespaceFactory()
    authorization = ApiKeyFactory(namespace=namespace).authorization
    ExecutionFactory(namespace=namespace, workflow_id="busy")
    signal = f"/api/v1/namespaces/{namespace.name}/workflows/busy/signal"
    pool = connection.pool
    assert pool is not None, "the connection pool is off (CHRONICLE_DB_POOL)"
    monkeypatch.setattr(pool, "timeout", 1.5)
    taken = []
    try:
        while len(taken) < pool.max_size:  # every connection the others do not hold
            try:
                taken.append(pool.getconn(timeout=1))
            except psycopg_pool.PoolTimeout:
                break
        began = time.monotonic()
        answer = asgi_post(signal, {"signal_name": "go"}, authorization=authorization)
        assert answer.status_code == 503, answer.content[:300]
        assert answer.json()["code"] == "unavailable" and int(answer["retry-after"]) >= 1
        assert time.monotonic() - began < 4
    finally:
        for held in taken:
            pool.putconn(held)
    assert asgi_post(signal, {"signal_name": "go"}, authorization=authorization).status_code == 200
    assert pool.timeout == 1.5  # the outage's shorter wait ended with the first connection made
