"""PostgreSQL's connection slots all taken by someone else: calls get a fast JSON 503 with
Retry-After, never a hang, and work again once a slot frees (reliability catalogue F17).

A real frontend connects as a role of its own with a ``CONNECTION LIMIT``: the test takes
the role's free slots and ends the frontend's pooled connections, so its pool must make new
ones and the server refuses each ("too many connections", SQLSTATE 53300), as a full server
does, without exhausting the server the other tests share. The pool's first refused
connection starts the outage (:class:`chronicle.db.PoolConnection`): every call, those
waiting together included, is answered within :data:`ANSWER_BOUND`, though the pool's
timeout is 30 s. Once the slots are released a connection is made, which ends the outage:
calls are served, and a pool that is then merely busy waits for its connection again.

Also here: the one private part of psycopg_pool Chronicle reads
(:func:`chronicle.db.waiting_checkouts`), on a real pool, so an upgrade that changes it
fails a test.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from django.db import OperationalError, connection
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from chronicle.db import (
    _OUTAGE,
    OUTAGE_POOL_TIMEOUT,
    TOO_MANY_CONNECTIONS,
    PoolConnection,
    _lost_server,
    unavailable,
    waiting_checkouts,
)
from history.models import WorkflowExecution
from tests.conftest import Tenant, database_conninfo, database_url, free_port, wait_until
from tests.e2e.test_database_outage import POOL_TIMEOUT, running_frontend, timed
from tests.tenant_calls import TenantCalls

# F17: 2 s, and 0.5 s for the HTTP round trip on a loaded test machine (the fault harness's
# bound, bench/faults/faults_db.py, is the same).
ANSWER_BOUND = 2.5
ROLE_SLOTS = 8  # the frontend's (a pool of up to 2, its LISTEN connection), the rest taken here
APP = "chronicle-test-exhaustion"  # the frontend's pooled connections' application_name


@pytest.fixture
def limited_role(django_db_setup: Any) -> Iterator[str]:
    """A login role with :data:`ROLE_SLOTS` connections, with the test database's owner's
    rights on its tables (a member of that role, not a superuser: a superuser has no limit)."""
    role = f"chronicle_exhaust_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_conninfo(), autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT {} IN ROLE {}").format(
                sql.Identifier(role), sql.Literal(ROLE_SLOTS), sql.Identifier(admin.info.user)
            )
        )
        try:
            yield role
        finally:
            sessions = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s"
            wait_until(lambda: not admin.execute(sessions, [role]).fetchall())
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture
def frontend_as_role(limited_role: str) -> Iterator[str]:
    """A frontend of one process, a pool of 1 to 2 connections, connecting as the role."""
    parts = urlsplit(database_url())
    where = parts.netloc.rpartition("@")[2]
    yield from running_frontend(
        urlunsplit(parts._replace(netloc=f"{limited_role}@{where}")),
        CHRONICLE_WEB_CONCURRENCY="1",
        CHRONICLE_DB_POOL_MIN="1",
        CHRONICLE_DB_POOL_MAX="2",
        CHRONICLE_DB_APPLICATION_NAME=APP,
    )


def take_free_slots(role: str, held: ExitStack) -> int:
    """Connect as ``role`` until the server refuses for want of a slot; the connections stay
    open until ``held`` closes. Returns how many were taken."""
    taken = 0
    while True:
        try:
            conn = psycopg.connect(database_conninfo(), user=role, autocommit=True, application_name="hog")
        except psycopg.OperationalError as exc:
            assert "too many connections" in str(exc), exc
            return taken
        held.enter_context(conn)
        taken += 1


def end_frontends_connections() -> int:
    with psycopg.connect(database_conninfo(), autocommit=True) as admin:
        query = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s"
        return len(admin.execute(query, [APP]).fetchall())


def assert_unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text[:300]
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json()["code"] == "unavailable"
    assert int(answer.headers["retry-after"]) >= 1


def test_calls_are_answered_fast_while_the_slots_are_taken_and_served_after(
    frontend_as_role: str, limited_role: str, make_tenant: Callable[..., Tenant]
) -> None:
    tenant = make_tenant()
    calls = TenantCalls(frontend_as_role, tenant, timeout=POOL_TIMEOUT + 20)
    client, start, listing = calls.client, calls.start, calls.listing

    assert start(f"before-{uuid.uuid4().hex[:8]}").status_code == 201
    with ExitStack() as held:
        assert take_free_slots(limited_role, held) > 0
        assert end_frontends_connections() > 0
        take_free_slots(limited_role, held)  # the slots those connections held
        # Four calls at once: more than the pool's two connections, so some wait in its queue.
        with ThreadPoolExecutor(4) as threads:
            together = list(threads.map(lambda call: timed(call), [listing, listing, listing, listing]))
        one_by_one = [timed(call) for call in (listing, lambda: start("during"), listing)]
        for answer, took in together + one_by_one:
            assert_unavailable(answer)
            assert took < ANSWER_BOUND, (took, [t for _, t in together + one_by_one])

    # The slots are free: the next connection made ends the outage, and calls are served.
    began = time.monotonic()
    wait_until(lambda: listing().status_code == 200, timeout=10, interval=0.2)
    assert time.monotonic() - began < ANSWER_BOUND, "no call served soon after the slots were freed"
    assert "during" not in {run["workflow_id"] for run in listing().json()["executions"]}
    assert start(f"after-{uuid.uuid4().hex[:8]}").status_code == 201
    # And the pool has its long timeout back: a call waiting behind two busy connections
    # waits past the outage's 1 s, for a connection, instead of getting a 503.
    assert_busy_pool_waits(client)


def assert_busy_pool_waits(client: httpx.Client) -> None:
    """Both pooled connections taken by signals waiting for a run's row (locked here): a
    listing waits until the lock is released (3 s) and is served."""
    workflow_id = f"busy-{uuid.uuid4().hex[:8]}"
    body = {"workflow_id": workflow_id, "workflow_type": "T", "task_queue": "q"}
    assert client.post("workflows", json=body).status_code == 201
    runs = WorkflowExecution._meta.db_table
    signalled: list[httpx.Response] = []
    with psycopg.connect(database_conninfo()) as holder:
        holder.execute(f'SELECT 1 FROM "{runs}" WHERE workflow_id = %s FOR UPDATE', [workflow_id])
        signals = [
            threading.Thread(
                target=lambda: signalled.append(
                    client.post(f"workflows/{workflow_id}/signal", json={"signal_name": "s"})
                )
            )
            for _ in range(2)
        ]
        for signal in signals:
            signal.start()
        time.sleep(0.5)  # both signals now wait for the row, on the pool's two connections
        threading.Timer(3.0, holder.rollback).start()
        listed, took = timed(lambda: client.get("workflows"))
        for signal in signals:
            signal.join(timeout=30)
    assert listed.status_code == 200, listed.text[:300]
    assert took > 2.0, took
    assert [answer.status_code for answer in signalled] == [200, 200]


def test_a_waiting_checkout_can_be_failed(pools: list[ConnectionPool[Any]]) -> None:
    """:func:`chronicle.db.waiting_checkouts` on a real pool: psycopg_pool's private queue
    of waiting checkouts, each of which ``fail`` ends at once with the error given."""
    pool: ConnectionPool[Any] = ConnectionPool(
        database_conninfo(), min_size=1, max_size=1, timeout=30, open=False
    )
    pools.append(pool)
    pool.open(wait=True, timeout=10)
    held = pool.getconn()
    assert waiting_checkouts(pool) == []
    outcome: list[BaseException] = []

    def checkout() -> None:
        try:
            pool.putconn(pool.getconn())
        except PoolTimeout as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=checkout)
    began = time.monotonic()
    waiter.start()
    waiting = wait_until(lambda: waiting_checkouts(pool))
    assert len(waiting) == 1
    assert waiting[0].fail(PoolTimeout("cut short")) is True
    waiter.join(timeout=5)
    assert time.monotonic() - began < 5, "the wait was not cut short"
    assert len(outcome) == 1 and isinstance(outcome[0], PoolTimeout)
    assert waiting[0].fail(PoolTimeout("again")) is False  # its wait is over
    pool.putconn(held)


def test_a_checkout_that_only_timed_out_shortens_waits_until_one_is_served(django_db_blocker: Any) -> None:
    """A busy pool's checkout can time out too, and such a pool makes no new connection
    that would end the outage: it ends at the next checkout served (here on another
    thread, which checks out of the process's pool), so load does not stay 503s."""
    timed_out = OperationalError("no connection")
    timed_out.__cause__ = PoolTimeout("couldn't get a connection after 30.00 sec")
    with django_db_blocker.unblock():
        pool = connection.pool  # type: ignore[attr-defined]  # Chronicle's backend has one
        timeout = pool.timeout
        try:
            assert unavailable(timed_out) is not None
            assert pool.timeout == OUTAGE_POOL_TIMEOUT

            def checkout() -> None:
                connection.ensure_connection()
                connection.close()

            served = threading.Thread(target=checkout)
            served.start()
            served.join(timeout=10)
            assert pool.timeout == timeout
            assert _OUTAGE.reason is None
        finally:
            _OUTAGE.end()


def test_another_pools_refused_connection_is_no_outage(pools: list[ConnectionPool[Any]]) -> None:
    """A pool built from the settings' options to another address (a test's, a tool's)
    shares the connection class: its refused attempts leave the process's pool alone."""
    closed = {**connection.get_connection_params(), "host": "127.0.0.1", "port": free_port()}
    pool: ConnectionPool[Any] = ConnectionPool(
        kwargs=closed, connection_class=PoolConnection, min_size=1, open=False
    )
    pools.append(pool)
    pool.open(wait=False)
    wait_until(lambda: pool.get_stats().get("connections_errors", 0) > 0)
    assert _OUTAGE.reason is None


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (psycopg.errors.lookup(TOO_MANY_CONNECTIONS)(), True),  # no slot left: only ever at connect
        (psycopg.OperationalError("connection failed: FATAL:  sorry, too many clients already"), True),
        (psycopg.errors.lookup("57P01")(), True),  # the server shutting down
        (psycopg.errors.lookup("57014")(), False),  # a statement cancelled: the server is there
        (psycopg.errors.lookup("40P01")(), False),  # a deadlock victim
    ],
)
def test_which_connection_errors_mean_the_server_is_out_of_reach(
    error: psycopg.OperationalError, lost: bool
) -> None:
    assert _lost_server(error) is lost
