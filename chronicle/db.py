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
from typing import Any, ParamSpec, Self, TypeVar

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
# The server answered but is busy (out of connection slots: its own, or the CONNECTION
# LIMIT of the role or the database) or still starting: it is reachable, and waiting for a
# free slot is the right behaviour for a command. libpq reports these at connect time as
# text only (no SQLSTATE).
BUSY_SERVER_MESSAGES = (
    "too many clients",
    "too many connections for",  # role "...", database "..."
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
        """Why the server cannot be reached now, or None; during an outage (a connection
        failed to be made, none since: :class:`_Outage`) its reason, without asking."""
        if (reason := _OUTAGE.reason) is not None:
            return reason
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
# enough for a connection a busy request hands back, short enough to answer in 2 s.
OUTAGE_POOL_TIMEOUT = 1.0
# SQLSTATE too_many_connections: the server (or the role, or the database) has no slot
# left. PostgreSQL raises it only as a connection starts, never to a running statement.
TOO_MANY_CONNECTIONS = "53300"


def unavailable(error: BaseException) -> ChronicleError | None:
    """The 503 (``unavailable``, Retry-After) a request earns when the database failed
    it from outside the request's control, or None for any other error.

    ``OperationalError`` and ``InterfaceError`` are what Django raises for a server that
    is down, restarting or out of connections, for a pool that handed out nothing in
    time, and for a statement the server cancelled (a timeout, a deadlock victim): each
    is worth retrying, none is the caller's fault nor a bug to hide behind a 500. A
    failure to connect at all also starts the outage (:class:`_Outage`), if the pool's
    own failure had not already, so the requests after it are answered within about 2 s,
    not after the pool's timeout.
    """
    if not isinstance(error, OperationalError | InterfaceError):
        return None
    cause = error.__cause__
    if cause is not None and _lost_server(cause):
        # A checkout that waited out its timeout is no proof: a busy pool's does too.
        _OUTAGE.begin(_first_line(cause), confirmed=not isinstance(cause, psycopg_pool.PoolTimeout))
    return ChronicleError(
        ErrorCode.UNAVAILABLE,
        "the database is unavailable; retry later",
        retry_after=RETRY_AFTER_SECONDS,
    )


def _lost_server(cause: BaseException | None) -> bool:
    """Whether the database error says the server is out of reach, not that a statement
    failed: no pooled connection came in time, a connection could not be made or was
    lost (no SQLSTATE, or class 08), the server is shutting down or starting (57P0x), or
    it has no connection slot left (53300).

    53300 counts because PostgreSQL raises it only to a connection being made: the
    request that meets it has no connection, and none comes until another client leaves,
    so a long wait for one is the hang the outage exists to cut short. (libpq reports it
    today as text, with no SQLSTATE, which counts already; this keeps it counted if the
    driver ever parses the code.)"""
    if isinstance(cause, psycopg_pool.PoolTimeout):
        return True
    if not isinstance(cause, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = cause.sqlstate
    return state is None or state.startswith(("08", "57P0")) or state == TOO_MANY_CONNECTIONS


class PoolConnection(psycopg.Connection[Any]):
    """The class of the connections Django's pool makes (``OPTIONS["pool"]`` in the
    settings): a failure to make one starts the outage at once, and one made ends it.

    The pool makes its connections in background workers; a request only waits for one,
    and saw nothing of a server refusing them ("too many clients", a closed port) until
    its own wait, the pool's whole timeout, ran out. ``connection_class`` is the pool's
    public way to make its connections, and the only place that sees each attempt fail
    or succeed the moment it does (its ``reconnect_failed`` callback comes only after
    ``reconnect_timeout`` of failures, and nothing tells of a success).

    Only the attempts of the process's own pool count: other pools built from the
    settings' options (a test's, a tool's, to another address) share the class, and are
    told apart by the connection parameters they pass.
    """

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        try:
            made = super().connect(conninfo, **kwargs)
        except psycopg.OperationalError as exc:
            _OUTAGE.begin(_first_line(exc), made_with=kwargs)
            raise
        _OUTAGE.end(made_with=kwargs)
        return made


class _Outage:
    """While connections fail to come, checkouts wait :data:`OUTAGE_POOL_TIMEOUT` for one.

    The pool's timeout (``CHRONICLE_DB_POOL_TIMEOUT``) is sized for a busy pool, where
    waiting beats refusing; against a server that is down or has no slot left, every
    request would wait it out and then fail. An outage begins at the first failure to
    make a connection (the pool's own, :class:`PoolConnection`, or a request's) and ends
    at the first connection made again, which restores the timeout. One begun by a
    request whose checkout only timed out (unconfirmed: a busy pool's does too, and
    makes no new connection that would end it) also ends at the next checkout served,
    unless a failed attempt confirms it first. Meanwhile a new checkout waits
    :data:`OUTAGE_POOL_TIMEOUT`, the reachability probe says "unreachable" (:class:`Reachability`),
    and a checkout already waiting with the long timeout is failed once it has waited
    :data:`OUTAGE_POOL_TIMEOUT` of the outage (:meth:`_cut_waits_short`): every request
    gets its answer within about 2 s. A pool that is merely busy (its
    connections all in use, the server taking new ones) makes no failed attempt, so it
    keeps its timeout; one that cannot grow because the server is full waits 1 s for a
    connection handed back before the 503.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reason: str | None = None  # why, while an outage lasts
        self.pool: Any = None
        self.saved_timeout = 0.0
        self.confirmed = False  # a connection failed to be made during it
        self.ended = threading.Event()

    def begin(self, reason: str, *, confirmed: bool = True, made_with: dict[str, Any] | None = None) -> None:
        """An attempt to connect failed (``made_with``: the pool's, with these parameters),
        or a request's checkout failed (``confirmed`` False if it only timed out)."""
        if self.reason is not None and (self.confirmed or not confirmed):
            return  # the common case during an outage: every refused attempt says so
        pool = getattr(connection, "pool", None)  # one pool per process, whichever thread asks
        # Only a pool of PoolConnection tells when a connection is made again, which ends it.
        if pool is None or not issubclass(pool.connection_class, PoolConnection):
            return
        if made_with is not None and made_with != pool.kwargs:
            return  # another pool's attempt
        with self.lock:
            if self.reason is not None:
                if confirmed and not self.confirmed:
                    self.confirmed = True
                    connection_created.disconnect(dispatch_uid=_OUTAGE_UID)
                return
            self.reason, self.pool, self.saved_timeout = reason, pool, pool.timeout
            self.confirmed = confirmed
            pool.timeout = min(pool.timeout, OUTAGE_POOL_TIMEOUT)
            if not confirmed:
                connection_created.connect(self._served, dispatch_uid=_OUTAGE_UID)
            self.ended = threading.Event()
            threading.Thread(
                target=self._cut_waits_short, args=(pool, self.ended), name="chronicle-db-outage", daemon=True
            ).start()
        log.warning("no database connection comes (%s): requests wait 1 s for one, then get a 503", reason)

    def end(self, made_with: dict[str, Any] | None = None) -> None:
        """A connection was made (``made_with``: by the pool, with these parameters), or,
        during an unconfirmed outage, a checkout was served."""
        if self.reason is None:
            return  # the common case: a connection made while all is well
        with self.lock:
            if self.reason is None or (made_with is not None and made_with != self.pool.kwargs):
                return
            self.pool.timeout = self.saved_timeout
            self.reason, self.pool = None, None
            self.ended.set()
            connection_created.disconnect(dispatch_uid=_OUTAGE_UID)
        log.warning("database connections come again: requests wait the pool's timeout for one")

    def _served(self, sender: object, **kwargs: object) -> None:
        """``connection_created`` during an unconfirmed outage: a checkout was served."""
        self.end()

    @staticmethod
    def _cut_waits_short(pool: Any, ended: threading.Event) -> None:
        """Until ``ended``, each :data:`OUTAGE_POOL_TIMEOUT`: fail the checkouts that were
        already waiting the time before (a checkout waits at most two of them)."""
        waiting = waiting_checkouts(pool)
        while not ended.wait(OUTAGE_POOL_TIMEOUT):
            for checkout in waiting:
                checkout.fail(psycopg_pool.PoolTimeout("no connection: the database refuses new ones"))
            waiting = waiting_checkouts(pool)


_OUTAGE_UID = "chronicle-db-outage"


def waiting_checkouts(pool: psycopg_pool.ConnectionPool[Any]) -> list[Any]:
    """The checkouts of ``pool`` waiting for a connection now; ``fail(error)`` ends one's
    wait with ``error`` (and returns False if it had already ended).

    psycopg_pool has no public way to end a wait early (only ``close()``, which fails them
    all for good), so this reads its private queue, under its lock, as ``close()`` does.
    ``tests/integration/test_connection_exhaustion.py`` checks it on a real pool: an
    upgrade that changes the queue fails that test.
    """
    with pool._lock:
        return list(pool._waiting)


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
