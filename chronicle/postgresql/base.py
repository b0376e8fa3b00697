"""Django's PostgreSQL backend, with a connection pool whose check costs no round trip.

Django's health check (``CONN_HEALTH_CHECKS`` with a pool) sends an empty query on every
checkout: a trip to PostgreSQL and back for each transaction, about six per workflow on
the hot path. An idle pooled connection has nothing to read, so its socket tells whether
the server dropped it: a restart, a failover or an idle-session kill sends an error and
closes, which makes the socket readable. Only then does :func:`check_pooled_connection`
send the empty query, which raises, and the pool replaces the connection instead of
failing the request that got it.

A connection cut off without a word (a network partition) passes this check as it would
pass the empty query until TCP gives up; libpq's keepalives cover that case either way.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from django.db.backends.postgresql import base


def check_pooled_connection(conn: psycopg.Connection[Any]) -> None:
    """Raise if ``conn`` is no longer usable; send a query only when its socket says so."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the pooled connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        # Something arrived on an idle connection: the server's goodbye, or a notice.
        # The empty query reads it, and raises if the server has gone.
        conn.execute("")


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's wrapper; its pool, with health checks on, checks with the socket first."""

    @property
    def pool(self) -> Any:
        pool = super().pool  # type: ignore[misc]  # (Django's stubs lack the pool)
        if pool is not None and self.settings_dict["CONN_HEALTH_CHECKS"]:
            # Django passes its own check to the pool it builds and takes no other.
            pool._check = check_pooled_connection
        return pool
