"""Connection details for the dedicated LISTEN connections, a reachability check, and how
daemons ride out a lost database connection."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import psycopg
from asgiref.sync import sync_to_async
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, connections

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

REACHABLE_TIMEOUT_SECONDS = 5
# The server answered but is busy (out of connection slots) or still starting: it is
# reachable, and the connection pool's wait for a free slot is the right behaviour.
# libpq reports these at connect time as text only (no SQLSTATE).
BUSY_SERVER_MESSAGES = (
    "too many clients",
    "remaining connection slots are reserved",
    "the database system is starting up",
)


def listen_conninfo() -> str:
    """A libpq conninfo string for the default database, for a raw psycopg connection."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    parts = []
    for key, value in params.items():
        if value in (None, "") or key in ("prepare_threshold", "application_name"):
            continue
        if key == "database":
            key = "dbname"
        parts.append(f"{key}='{value}'")
    return " ".join(parts)


def require_reachable_database() -> None:
    """Raise one clear CommandError when the configured PostgreSQL cannot be reached.

    Commands call this before the first query: the connection pool would otherwise
    retry for its whole timeout (30 s), logging a warning on every attempt, before
    failing with a less direct error. A server that answers "too many clients" or
    "starting up" counts as reachable: that is a wait, not a misconfiguration.
    """
    settings_dict = connection.settings_dict
    where = f"{settings_dict.get('HOST') or 'localhost'}:{settings_dict.get('PORT') or 5432}"
    where += f"/{settings_dict.get('NAME')}"
    try:
        psycopg.connect(listen_conninfo(), connect_timeout=REACHABLE_TIMEOUT_SECONDS).close()
    except psycopg.Error as exc:
        if any(message in str(exc) for message in BUSY_SERVER_MESSAGES):
            return
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CommandError(
            f"cannot reach PostgreSQL at {where} ({reason}); check DATABASE_URL and that the server runs"
        ) from None


def off_loop(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``fn`` for an async view: run on an executor thread, the connection returned after.

    Executor threads outlive requests, and Django only checks or recycles connections
    at request boundaries on its own thread, so a connection an executor thread kept
    would never go back to the pool and, once PostgreSQL dropped it, fail every call
    that landed on that thread. Handing it back after each call lets the pool check it
    and replace a dead one on the next checkout.
    """

    @functools.wraps(fn)
    def in_thread(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:
                connection.close()

    return sync_to_async(in_thread, thread_sensitive=False)


class DatabaseOutage:
    """How a daemon's loop rides out a lost PostgreSQL connection (a restart, a failover).

    A daemon holds its connection for its whole life, outside any request, so Django never
    checks or replaces it: after PostgreSQL drops it every query fails. ``lost`` closes
    the broken connections (the next query opens a fresh one), logs once per outage, and
    sleeps with a growing backoff; ``recovered`` logs the end of the outage. The loop's
    durable state (leases, rows) is in the database, so starting over is always safe.
    """

    FIRST_BACKOFF = 0.2
    MAX_BACKOFF = 5.0

    def __init__(self, name: str) -> None:
        self.name = name
        self.backoff = 0.0
        self.since: float | None = None

    def lost(self, error: DatabaseError | psycopg.Error) -> None:
        if self.since is None:
            self.since = time.monotonic()
            log.warning("%s lost its database connection (%s); reconnecting", self.name, _first_line(error))
        connections.close_all()
        self.backoff = min(self.MAX_BACKOFF, max(self.FIRST_BACKOFF, self.backoff * 2))
        time.sleep(self.backoff)

    def recovered(self) -> None:
        if self.since is not None:
            log.warning("%s reconnected after %.1f s", self.name, time.monotonic() - self.since)
        self.since, self.backoff = None, 0.0


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
