"""Django's PostgreSQL backend, with a connection pool whose check costs no round trip.

Django's health check (``CONN_HEALTH_CHECKS`` with a pool) sends an empty query on every
checkout: a trip to PostgreSQL and back for each transaction, about six per workflow on
the hot path. An idle pooled connection has nothing to read, so its socket tells whether
the server dropped it: a restart, a failover or an idle-session kill sends an error and
closes, which makes the socket readable. Only then does :func:`check_pooled_connection`
send the empty query, which raises, and the pool replaces the connection instead of
failing the request that got it.

A connection found dead this way is rarely alone: a restart or a failover drops every
connection to the server at once. The pool would hand out the others one by one, sleeping
1, 2, 4 s between them (its own backoff after a failed check), so the first request after
a failover waited for all of them. The first dead one therefore drains the pool
(:class:`PoolCheck`): the idle connections are replaced together, and those in use are
replaced as they come back.

A connection cut off without a word (a network partition) passes this check until TCP
gives up; the keepalives and TCP user timeout set in ``chronicle.settings`` make that
about 10 s, after which the socket reports the error and the check catches it.

A checkout also fails fast when the server is out of reach (:class:`FailFastCheckout`):
the pool's timeout (``CHRONICLE_DB_POOL_TIMEOUT``, 30 s) is sized for a busy pool, and
the first request of an outage used to wait all of it before its 503.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool, PoolTimeout

from chronicle.db import Reachability

# How long a checkout waits for a pooled connection before asking whether the server is
# there at all; past it, a server that refuses (or does not answer) fails the checkout.
PROBE_AFTER_SECONDS = 1.0
# A probe's connect timeout (psycopg's least): a server that drops packets costs this.
PROBE_CONNECT_TIMEOUT = 2


def check_pooled_connection(conn: psycopg.Connection[Any]) -> None:
    """Raise if ``conn`` is no longer usable; send a query only when its socket says so."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the pooled connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        # Something arrived on an idle connection: the server's goodbye, or a notice.
        # The empty query reads it, and raises if the server has gone.
        conn.execute("")


class PoolCheck:
    """The pool's check: :func:`check_pooled_connection`, and a dead connection drains the
    pool (every idle connection closed and replaced, those in use replaced when returned):
    what killed one (a restart, a failover) killed the others, which would otherwise be
    handed out and found dead one at a time, with the pool's growing sleep between them."""

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self.pool = pool

    def __call__(self, conn: psycopg.Connection[Any]) -> None:
        try:
            check_pooled_connection(conn)
        except Exception:
            self.pool.drain()
            raise


class FailFastCheckout:
    """A pool's checkout that tells a busy pool from a server out of reach.

    It waits :data:`PROBE_AFTER_SECONDS` for a connection as the pool would; if none came,
    it tries one direct connection (:class:`chronicle.db.Reachability`, shared by the
    waiting threads): a server that refuses it, or is not there, fails the checkout at
    once with the pool's ``PoolTimeout`` (a 503, :func:`chronicle.db.unavailable`, which
    then shortens the pool's wait for the rest of the outage). A server that answers, even
    "too many clients", is merely busy: the checkout waits out the rest of its timeout,
    unless the pool's own connection attempts have been refused meanwhile, which starts an
    outage of its own (:class:`chronicle.db.PoolConnection`) and answers the probe as out of
    reach without asking.
    """

    def __init__(self, pool: ConnectionPool[Any], params: dict[str, Any]) -> None:
        """``params``: the pool's connection's (Django's ``get_connection_params()``)."""
        self.pool = pool
        self.getconn = pool.getconn  # the pool's own
        probe = {**params, "connect_timeout": PROBE_CONNECT_TIMEOUT, "autocommit": True}
        self.reachability = Reachability(lambda: psycopg.connect(**probe))

    def __call__(self, timeout: float | None = None) -> Any:
        whole = self.pool.timeout if timeout is None else timeout
        first = min(whole, PROBE_AFTER_SECONDS)
        try:
            return self.getconn(timeout=first)
        except PoolTimeout:
            if first >= whole:
                raise
        reason = self.reachability.unreachable()
        if reason is not None:
            raise PoolTimeout(f"no connection: the database server is unreachable ({reason})")
        return self.getconn(timeout=whole - first)


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's wrapper; its pool, with health checks on, checks with the socket first, and
    its checkout fails fast while the server is out of reach."""

    @property
    def pool(self) -> Any:
        pool = super().pool  # type: ignore[misc]  # (Django's stubs lack the pool)
        if pool is not None and not isinstance(pool.getconn, FailFastCheckout):
            # Once per pool, which Django builds in its property and shares between threads.
            if self.settings_dict["CONN_HEALTH_CHECKS"]:
                # Django passes its own check to the pool it builds and takes no other.
                pool._check = PoolCheck(pool)
            # Django calls the pool's getconn().
            pool.getconn = FailFastCheckout(pool, self.get_connection_params())
        return pool
