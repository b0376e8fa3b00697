"""A pooled checkout tells a busy pool (wait, as before) from a server out of reach (fail fast).

The pool's timeout is sized for a busy pool; against a server that refuses connections the
first request of an outage used to wait all of it (30 s) for its 503. The checkout now
asks, after :data:`chronicle.postgresql.base.PROBE_AFTER_SECONDS`, whether the server is
there: real pools, against the test PostgreSQL and against a closed port.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection
from psycopg_pool import ConnectionPool, PoolTimeout

from chronicle.postgresql.base import PROBE_AFTER_SECONDS, FailFastCheckout
from tests.conftest import free_port

pytestmark = pytest.mark.django_db


def params(**changes: Any) -> dict[str, Any]:
    """The test database's connection parameters, as Django gives them to its pool."""
    return {**connection.get_connection_params(), "autocommit": True, **changes}


def pool_of(kwargs: dict[str, Any], timeout: float) -> ConnectionPool[Any]:
    pool: ConnectionPool[Any] = ConnectionPool(
        kwargs=kwargs, min_size=1, max_size=1, timeout=timeout, open=False
    )
    pool.open(wait=False)
    return pool


def test_a_checkout_from_a_busy_pool_still_waits_for_a_connection(pools: list[ConnectionPool[Any]]) -> None:
    pool = pool_of(params(), timeout=10)
    pools.append(pool)
    checkout = FailFastCheckout(pool, params())
    held = pool.getconn()  # the pool's only connection: every other checkout must wait
    threading.Timer(2.5, pool.putconn, args=(held,)).start()
    began = time.monotonic()
    got = checkout()
    took = time.monotonic() - began
    pool.putconn(got)
    assert got is held  # the one connection, once handed back
    assert 2.0 < took < 5.0, took  # waited past the probe, for the connection
    assert checkout.reachability.asked_at is not None  # the server was asked, and answered
    assert checkout.reachability.reason is None


def test_a_checkout_against_a_closed_port_fails_fast(pools: list[ConnectionPool[Any]]) -> None:
    closed = params(host="127.0.0.1", port=free_port())
    pool = pool_of(closed, timeout=30)
    pools.append(pool)
    checkout = FailFastCheckout(pool, closed)
    began = time.monotonic()
    with pytest.raises(PoolTimeout, match="unreachable"):
        checkout()
    assert time.monotonic() - began < PROBE_AFTER_SECONDS + 2.0


def test_a_pool_shorter_than_the_probe_wait_is_not_probed(pools: list[ConnectionPool[Any]]) -> None:
    """A pool already waiting little (the outage's own 1 s) fails on its own timeout."""
    closed = params(host="127.0.0.1", port=free_port())
    pool = pool_of(closed, timeout=0.3)
    pools.append(pool)
    checkout = FailFastCheckout(pool, closed)
    with pytest.raises(PoolTimeout):
        checkout()
    assert checkout.reachability.asked_at is None


def test_djangos_pool_checks_out_through_it() -> None:
    pool = connection.pool  # type: ignore[attr-defined]  # Chronicle's backend has one
    assert pool is not None
    assert isinstance(pool.getconn, FailFastCheckout)
