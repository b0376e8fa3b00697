"""The cursors the kernel's fixed SQL runs on: parameters bound apart, statements
prepared, and each statement's cursor kept with its connection.

Django's cursors bind on the client: psycopg parses the statement and quotes every value
into it in Python, which for a write of a few hundred rows cost more than PostgreSQL spent
on it. Bound apart, a statement's text is parsed by psycopg once per process and,
prepared, planned by PostgreSQL once per connection.

Timestamps come back through psycopg's own compiled loader, not Django's: Django's wraps
psycopg's pure-Python one to set the time zone, about 2.7 µs a value against 0.2 µs, and a
run row holds a dozen of them. The session's time zone is UTC (Django sets it so with
``USE_TZ``), where both give the same aware datetime; any other keeps Django's loader.

A new psycopg cursor also starts with a new adaptation context, which looks up and builds
a loader for every column of each result and a dumper for every parameter type: for the
run row's seventy columns, more than the statement's own round trip cost in Python. A
cursor that runs the same statement text again keeps its context (psycopg keeps it while
the query object is the same), so each connection keeps one cursor per statement text
(:class:`StatementCursors`, read through a :class:`KeptCursor`), and a kernel statement
finds its loaders and dumpers ready.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from datetime import UTC
from threading import Lock
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from psycopg import pq
from psycopg.postgres import types as pg_types
from psycopg.types.datetime import TimestamptzLoader

# Statement texts whose cursors one connection keeps (the kernel has a few dozen shapes).
KEPT_PER_CONNECTION = 128


@functools.lru_cache(maxsize=1024)
def numbered(sql: str) -> str:
    """``sql`` with its ``%s`` placeholders numbered as PostgreSQL writes them (``$1``...).

    psycopg finds a statement's placeholders by scanning its text, and remembers the scan
    only for short statements of few parameters; a write is neither, so it was scanned on
    every call. Numbered once here (the shapes are few), the text goes as it is. No kernel
    statement holds a literal ``%`` or a named placeholder. The cache also hands back the
    same string object for the same text, which is what lets a kept cursor keep its
    adaptation context (psycopg compares the query by identity).
    """
    pieces = sql.split("%s")
    return "".join(f"{piece}${i}" for i, piece in enumerate(pieces[:-1], start=1)) + pieces[-1]


class PreparingCursor(psycopg.RawCursor[Any]):
    """A cursor whose statements are numbered (:func:`numbered`) and prepared on their
    first run (Django's wrapper, which logs and counts them, passes no ``prepare``); each
    stays in the connection's cache of prepared statements, up to psycopg's limit of a
    hundred."""

    prepare_statements = True

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        prepare = self.prepare_statements if prepare is None else prepare
        return super().execute(numbered(query), params, prepare=prepare, binary=binary)


class LoggedCursor(PreparingCursor):
    """A cursor whose statements go whole, never prepared, so Django's query log has their
    text: even one an unlogged run on the same connection prepared earlier."""

    prepare_statements = False


class StatementCursors:
    """One connection's kept cursors, one per statement text (the least recently used
    dropped past :data:`KEPT_PER_CONNECTION`). A connection is used by one thread at a
    time, so its cursors are too."""

    def __init__(self, connection: psycopg.Connection[Any], *, utc: bool = False) -> None:
        self._connection = connection
        self._utc = utc
        self._by_text: OrderedDict[str, PreparingCursor] = OrderedDict()

    def cursor_for(self, query: str) -> PreparingCursor:
        cursor = self._by_text.get(query)
        if cursor is None:
            cursor = self._by_text[query] = PreparingCursor(self._connection)
            if self._utc:
                cursor.adapters.register_loader(_TIMESTAMPTZ_OID, _COMPILED_TIMESTAMPTZ_LOADER)
            if len(self._by_text) > KEPT_PER_CONNECTION:
                self._by_text.popitem(last=False)[1].close()
        else:
            self._by_text.move_to_end(query)
        return cursor


class KeptCursor:
    """What :func:`bound_cursor` hands Django's wrapper: each statement runs on its kept
    cursor, and results (``fetchone``, ``rowcount``...) are read from the one that ran last.

    Closing it (the end of its ``with`` block) drops only that cursor's results, so the
    cursor, and its adaptation context, serve the statement's next run. Two open at once on
    one connection are apart unless they run the same statement text, which no kernel
    code does before reading the first one's rows.
    """

    def __init__(self, kept: StatementCursors) -> None:
        self._kept = kept
        self._current: PreparingCursor | None = None

    def execute(
        self, query: str, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        self._current = self._kept.cursor_for(query)
        return self._current.execute(query, params, prepare=prepare, binary=binary)

    def close(self) -> None:
        """Drop the last statement's results (a history page may be large); keep the
        cursors and their loaders and dumpers."""
        if self._current is not None:
            self._current._reset()
            self._current._tx.set_pgresult(None, set_loaders=False)
            self._current = None

    def __getattr__(self, name: str) -> Any:
        if self._current is None:
            raise psycopg.InterfaceError("no statement has run on this cursor")
        return getattr(self._current, name)


_KEPT = "_chronicle_statement_cursors"
_kept_lock = Lock()
_TIMESTAMPTZ_OID = pg_types["timestamptz"].oid
# psycopg's default map holds its compiled loader where the C extension is installed.
_COMPILED_TIMESTAMPTZ_LOADER = (
    psycopg.adapters.get_loader(_TIMESTAMPTZ_OID, pq.Format.TEXT) or TimestamptzLoader
)


def _statement_cursors(connection: psycopg.Connection[Any], *, utc: bool = False) -> StatementCursors:
    """The connection's kept cursors, held on the connection itself: made on its first
    kernel statement, they go with it back to the pool and are dropped with it. ``utc``:
    the session's time zone is UTC, so timestamps may use the compiled loader."""
    cursors: StatementCursors | None = getattr(connection, _KEPT, None)
    if cursors is None:
        with _kept_lock:
            cursors = getattr(connection, _KEPT, None) or StatementCursors(connection, utc=utc)
            setattr(connection, _KEPT, cursors)
    return cursors


def bound_cursor() -> Any:
    """A cursor of Django's current connection (its transaction, its query logging) that
    sends parameters apart from the statement, as PostgreSQL's extended protocol does, on
    the connection's kept cursor for each statement text."""
    db: Any = connections[DEFAULT_DB_ALIAS]  # the backend's wrapper takes any DB-API cursor
    db.ensure_connection()
    db.validate_thread_sharing()
    if db.queries_logged:
        # Django's query log (DEBUG, a test capturing queries) reads a statement's text,
        # which psycopg keeps only for a statement it sends whole: logged ones go unprepared.
        return db.make_debug_cursor(LoggedCursor(db.connection))
    kept = _statement_cursors(db.connection, utc=db.timezone is UTC)
    return db.make_cursor(KeptCursor(kept))
