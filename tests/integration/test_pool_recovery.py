"""After a failover the pool serves again at once: no dead connection handed out one by one,
no reconnection waiting out a long backoff.

A restart or a failover drops every pooled connection together. The pool found them dead
one checkout at a time, sleeping 1, 2, 4 s between them (its backoff after a failed
check); :class:`chronicle.postgresql.base.PoolCheck` drains the pool at the first. And the
pool retried a lost connection with a doubling delay for up to 5 minutes, so after a 20 s
outage its next try came up to 10 s after the server was back: with the settings'
``reconnect_timeout`` it stops retrying after 2 s, and the next checkout connects at once.
Real pools, against the test PostgreSQL directly and through a TCP relay that is cut and
restored.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from psycopg_pool import ConnectionPool, PoolTimeout

from chronicle.postgresql.base import FailFastCheckout, PoolCheck
from tests.conftest import database_conninfo, database_url
from tests.e2e.test_database_outage import Relay

pytestmark = pytest.mark.django_db
POOL_SIZE = 4


def params(**changes: Any) -> dict[str, Any]:
    """The test database's connection parameters, as Django gives them to its pool."""
    return {**connection.get_connection_params(), "autocommit": True, **changes}


def chronicle_pool(kwargs: dict[str, Any], name: str) -> tuple[ConnectionPool[Any], FailFastCheckout]:
    """A pool as Chronicle's backend makes it: the settings' options, its check and checkout."""
    options = {**settings.DATABASES["default"]["OPTIONS"]["pool"], "min_size": POOL_SIZE}
    options["max_size"] = POOL_SIZE
    pool: ConnectionPool[Any] = ConnectionPool(kwargs=kwargs, open=False, name=name, **options)
    pool._check = PoolCheck(pool)
    checkout = FailFastCheckout(pool, kwargs)
    pool.open(wait=True, timeout=10)
    return pool, checkout


def serve_one(checkout: FailFastCheckout, pool: ConnectionPool[Any], within: float) -> float:
    """Seconds until a checkout hands out a connection that answers (503s meanwhile)."""
    began = time.monotonic()
    while time.monotonic() - began < within:
        try:
            conn = checkout()
        except PoolTimeout:
            continue
        try:
            conn.execute("SELECT 1")
            return time.monotonic() - began
        finally:
            pool.putconn(conn)
    raise AssertionError(f"no connection served within {within:.0f} s")


def test_the_settings_give_up_background_reconnection_quickly() -> None:
    assert settings.DATABASES["default"]["OPTIONS"]["pool"]["reconnect_timeout"] <= 2.0


def test_every_connection_dropped_at_once_is_replaced_at_the_first_checkout(
    pools: list[ConnectionPool[Any]],
) -> None:
    name = "chronicle-test-drain"
    pool, checkout = chronicle_pool(params(application_name=name), name)
    pools.append(pool)
    with psycopg.connect(database_conninfo(), autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            [name],
        ).fetchone()
    assert killed == (POOL_SIZE,)
    time.sleep(0.3)  # the server's goodbyes arrive on every idle socket
    # Found dead one by one, with the pool's sleep between them, this took 1 to 2 s with
    # four connections (and doubles with each one more).
    took = serve_one(checkout, pool, within=20)
    assert took < 0.5, took
    # The others were replaced together, not found dead by the next checkouts.
    again = [serve_one(checkout, pool, within=20) for _ in range(POOL_SIZE)]
    assert max(again) < 0.5, again


def test_a_connection_comes_at_once_when_the_server_returns_after_a_long_outage(
    pools: list[ConnectionPool[Any]],
) -> None:
    parts = urlsplit(database_url())
    if not parts.port:
        pytest.skip("the test database is on a unix socket: there is no TCP connection to cut")
    relay = Relay((parts.hostname or "127.0.0.1", parts.port))
    relay.start()
    try:
        pool, checkout = chronicle_pool(params(host="127.0.0.1", port=relay.port), "chronicle-test-relay")
        pools.append(pool)
        relay.cut()
        # Checkouts during the outage, as requests would make them: each fails fast.
        outage_ends = time.monotonic() + 9.0
        while time.monotonic() < outage_ends:
            with pytest.raises(PoolTimeout):
                pool.putconn(checkout())
        # With the pool's own backoff (tries at 0, 1, 3, 7, 15 s) the next try came 6 s after.
        relay.start()
        took = serve_one(checkout, pool, within=30)
        assert took < 2.5, took
    finally:
        relay.cut()
