"""Connection details for the dedicated LISTEN connections, a reachability check, how
daemons ride out a lost database connection, and the fast 503 requests get while
PostgreSQL is unreachable."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import psycopg
import psycopg_pool
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError
from django.db import DatabaseError, InterfaceError, OperationalError, connection, connections
from django.db.backends.signals import connection_created

from chronicle.errors import ChronicleError, ErrorCode

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
    reason = unreachable(
        lambda: psycopg.connect(listen_conninfo(), connect_timeout=REACHABLE_TIMEOUT_SECONDS)
    )
    if reason is not None:
        raise CommandError(
            f"cannot reach PostgreSQL at {where} ({reason}); check DATABASE_URL and that the server runs"
        )


def unreachable(connect: Callable[[], psycopg.Connection[Any]]) -> str | None:
    """Why the server cannot be reached by ``connect`` (a new connection, closed at once), or
    None if it answered: a busy or starting server (:data:`BUSY_SERVER_MESSAGES`) answered."""
    try:
        connect().close()
    except psycopg.Error as exc:
        if any(message in str(exc) for message in BUSY_SERVER_MESSAGES):
            return None
        return _first_line(exc)
    return None


class Reachability:
    """Whether the server answers, asked by one thread at a time and the answer shared for
    :data:`REACHABILITY_TTL_SECONDS`: the requests waiting for a pooled connection ask it
    together, and a busy server must not get a new connection attempt from each of them."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self.connect = connect
        self.lock = threading.Lock()
        self.reason: str | None = None
        self.asked_at: float | None = None

    def unreachable(self) -> str | None:
        with self.lock:
            fresh = self.asked_at is not None and time.monotonic() - self.asked_at < REACHABILITY_TTL_SECONDS
            if not fresh:
                self.reason = unreachable(self.connect)
                self.asked_at = time.monotonic()
            return self.reason


REACHABILITY_TTL_SECONDS = 1.0


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

    The backoff stops at 1 s: a failover takes 20 s or so, and a longer sleep would be
    time the shard owner's timers wait after the new primary takes writes. One attempt a
    second is nothing for a server that refuses it, and it fails at once.
    """

    FIRST_BACKOFF = 0.2
    MAX_BACKOFF = 1.0

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


# ---------------------------------------------------------------- requests during an outage

RETRY_AFTER_SECONDS = 2
# How long a request waits for a pooled connection once one has failed to come: long
# enough for a connection the server has just freed, short enough to answer in 2 s.
OUTAGE_POOL_TIMEOUT = 1.0


def unavailable(error: BaseException) -> ChronicleError | None:
    """The 503 (``unavailable``, Retry-After) a request earns when the database failed
    it from outside the request's control, or None for any other error.

    ``OperationalError`` and ``InterfaceError`` are what Django raises for a server that
    is down, restarting or out of connections, for a pool that handed out nothing in
    time, and for a statement the server cancelled (a timeout, a deadlock victim): each
    is worth retrying, none is the caller's fault nor a bug to hide behind a 500. A
    failure to connect at all also shortens the pool's wait (:class:`_Outage`), so the
    requests after it are answered within :data:`OUTAGE_POOL_TIMEOUT`, not the pool's
    timeout.
    """
    if not isinstance(error, OperationalError | InterfaceError):
        return None
    if _lost_server(error.__cause__):
        _OUTAGE.begin()
    return ChronicleError(
        ErrorCode.UNAVAILABLE,
        "the database is unavailable; retry later",
        retry_after=RETRY_AFTER_SECONDS,
    )


def _lost_server(cause: BaseException | None) -> bool:
    """Whether the database error says the server is out of reach, not that a statement
    failed: no pooled connection came in time, a connection could not be made or was
    lost (no SQLSTATE, or class 08), or the server is shutting down or starting (57P0x)."""
    if isinstance(cause, psycopg_pool.PoolTimeout):
        return True
    if not isinstance(cause, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = cause.sqlstate
    return state is None or state.startswith("08") or state.startswith("57P0")


class _Outage:
    """While connections fail to come, the pool waits :data:`OUTAGE_POOL_TIMEOUT` for one.

    The pool's timeout (``CHRONICLE_DB_POOL_TIMEOUT``) is sized for a busy pool, where
    waiting beats refusing; against a server that is down, every request would wait it
    out and then fail. The first connection made again ends the outage and restores it.
    """

    def __init__(self) -> None:
        self.saved_timeout: float | None = None
        self.lock = threading.Lock()

    def begin(self) -> None:
        pool = getattr(connection, "pool", None)  # one pool per process, whichever thread asks
        with self.lock:
            if pool is None or self.saved_timeout is not None:
                return
            self.saved_timeout = pool.timeout
            pool.timeout = min(pool.timeout, OUTAGE_POOL_TIMEOUT)
            connection_created.connect(self.end, dispatch_uid=_OUTAGE_UID)
        log.warning("the database is unreachable: requests get a 503 until it answers again")

    def end(self, sender: object, connection: object, **kwargs: object) -> None:
        pool = getattr(connection, "pool", None)
        with self.lock:
            saved, self.saved_timeout = self.saved_timeout, None
            if saved is None or pool is None:
                return
            pool.timeout = saved
            connection_created.disconnect(dispatch_uid=_OUTAGE_UID)
        log.warning("the database answers again")


_OUTAGE_UID = "chronicle-db-outage"


_OUTAGE = _Outage()


# ---------------------------------------------------------------- protective timeouts

ROLE_VARIABLE = "CHRONICLE_DB_ROLE"
# Per process role: how long a statement may wait for a lock, run, or leave a transaction
# idle before PostgreSQL ends it. A stuck or paused process (SIGSTOP, a debugger, a lost
# network) otherwise holds its row locks for ever, and every request needing those rows
# waits behind it; with these bounds the others get a 503 to retry in seconds. Daemons
# run the long statements (retention, archival), so theirs are looser.
PROTECTIVE_TIMEOUTS: dict[str, dict[str, str]] = {
    "frontend": {
        "lock_timeout": "5s",
        "statement_timeout": "30s",
        "idle_in_transaction_session_timeout": "60s",
    },
    "daemon": {
        "lock_timeout": "10s",
        "statement_timeout": "5min",
        "idle_in_transaction_session_timeout": "2min",
    },
}
_PROTECTION_UID = "chronicle-db-protection"


def protect_connections(timeouts: dict[str, str] | None) -> None:
    """Give every connection this process makes ``timeouts`` (session settings), and check
    on each that ``synchronous_commit`` is on; None removes the protection.

    Set once per physical connection, as it is first handed out: a pooled connection keeps
    its session settings between requests, so the hot path pays nothing.
    """
    connection_created.disconnect(dispatch_uid=_PROTECTION_UID)
    if timeouts is not None:
        connection_created.connect(_Protection(timeouts), weak=False, dispatch_uid=_PROTECTION_UID)


def protect_by_role(role: str) -> None:
    """Protect this process's connections with its role's timeouts (``frontend`` or
    ``daemon``, from ``CHRONICLE_DB_ROLE``); an empty role leaves them unbounded."""
    if not role:
        return
    if role not in PROTECTIVE_TIMEOUTS:
        raise ImproperlyConfigured(f"{ROLE_VARIABLE}={role!r}: use one of {', '.join(PROTECTIVE_TIMEOUTS)}")
    protect_connections(PROTECTIVE_TIMEOUTS[role])


def protect_as(default_role: str) -> None:
    """Protect this process as ``default_role`` unless ``CHRONICLE_DB_ROLE`` names a role.

    The daemons' commands call this as they start, and gunicorn's config sets the
    frontend's, so a deployment has the bounds without setting anything. Connections made
    before (the checks a command runs first) are closed, so each one in use carries them.
    """
    protect_by_role(os.environ.get(ROLE_VARIABLE) or default_role)
    connection.close()
    close_pool = getattr(connection, "close_pool", None)  # PostgreSQL's backend has it
    if close_pool is not None:
        close_pool()  # pooled connections keep their session: new ones carry the bounds


class _Protection:
    """The ``connection_created`` receiver: one statement per new physical connection."""

    def __init__(self, timeouts: dict[str, str]) -> None:
        self.timeouts = dict(timeouts)
        self.sql = "SELECT " + ", ".join(["set_config(%s, %s, false)"] * len(timeouts) + [_COMMIT])
        self.done: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()

    def __call__(self, sender: object, connection: Any, **kwargs: object) -> None:
        raw = connection.connection
        if raw is None or raw in self.done:
            return
        params = [value for pair in self.timeouts.items() for value in pair]
        with raw.cursor() as cursor:
            cursor.execute(self.sql, params)
            row = cursor.fetchone()
        require_durable_commits(row[-1] if row else None)
        self.done.add(raw)


_COMMIT = "current_setting('synchronous_commit')"


def require_durable_commits(setting: str | None) -> None:
    """Refuse to serve when ``synchronous_commit`` is off: a 2xx promises the write is
    durable, and with it off an acknowledged commit can vanish in a crash."""
    if setting == "off":
        raise ImproperlyConfigured(
            "PostgreSQL's synchronous_commit is off: acknowledged writes could be lost in a crash; "
            "turn it on (the default) for Chronicle's database or role"
        )
