"""The connection pool's check of a connection it hands out: cheap when the connection is
plainly alive, a real round trip when it may not be.

Checking every connection with an empty query cost each request a round trip (and
PostgreSQL a transaction) on the hot path, where a request often borrows a connection
several times. A connection the server dropped (a restart, a failover,
``pg_terminate_backend``, an idle-session timeout) has something to read on its socket:
the server's last message or the end of the stream. So a connection returned to the pool
moments ago, with nothing waiting on its socket, goes out unchecked; any other gets the
empty query, and the pool replaces it if that fails. A silent loss (a firewall dropping a
long-idle connection without a word) is caught by the idle limit.

No Django here: the settings module passes these to the pool.
"""

from __future__ import annotations

import select
import time

import psycopg
from psycopg_pool import ConnectionPool

# A connection idle for longer than this is checked with a round trip whatever its socket says.
FULL_CHECK_AFTER_IDLE_SECONDS = 5.0
_RETURNED_AT = "_chronicle_returned_at"


def remember_return(conn: psycopg.Connection[object]) -> None:
    """Note that the connection goes back to the pool now."""
    setattr(conn, _RETURNED_AT, time.monotonic())


def check_pooled(conn: psycopg.Connection[object]) -> None:
    """The pool's ``check`` hook: raise if the connection is not fit to hand out."""
    returned_at = getattr(conn, _RETURNED_AT, None)
    recently_used = returned_at is not None and time.monotonic() - returned_at < FULL_CHECK_AFTER_IDLE_SECONDS
    if recently_used and not conn.closed and not _has_unread_input(conn):
        return
    ConnectionPool.check_connection(conn)


def _has_unread_input(conn: psycopg.Connection[object]) -> bool:
    """Whether the server sent something while the connection sat idle (a goodbye, mostly)."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)
