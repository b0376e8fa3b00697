"""The clock that decides workflow time: event times, timer fire times, task visibility.

Every deployment keeps real time, and there :func:`now` *is* ``django.utils.timezone.now``
(bound at import, so the engine pays nothing for the indirection and reads no row).

A stack started with ``CHRONICLE_TIME_SKIPPING=true`` (what the SDK's
``WorkflowEnvironment.start_time_skipping()`` starts, never a real deployment) keeps a
*skipped clock* instead: real time plus an offset that only grows. The offset lives in a
one-row table (the ``history`` app's ``SkippedClock``), because every process of the stack
(the frontend that starts runs and records completions, the shard owner that fires timers)
must agree on it; each :func:`now` reads it, which a test-only mode can afford. The shard
owner moves it forward to the next timer when the stack is idle (``history.time_skipping``),
and a test moves it with ``env.sleep()``.

What stays real time whatever the mode: leases, heartbeats of processes and pollers, API key
expiry, rate limits, metrics. Those measure the processes, not the workflows, and a jump of
the skipped clock must not expire a shard lease or a poller's liveness.

The shard owner's time-critical decisions (which lease is live, which timer is due, the
time a firing stamps) take PostgreSQL's clock, the one every process shares, not the
owner's: :func:`database_now` is the workflow now as an expression the database evaluates
in the statement that compares with it, and :func:`from_database` turns a time the database
read into workflow time. A process whose clock jumps can then neither fire a timer early
nor take a live lease.

The offset only grows, so the skipped clock is never behind real time: a row written with
real time and compared with the skipped clock looks older, never younger, and nothing that
must happen waits longer than it would without skipping.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import DateTimeField
from django.db.models.expressions import RawSQL
from django.utils import timezone

ENV_VAR = "CHRONICLE_TIME_SKIPPING"
# The one-row table (id 1) the history app's ``SkippedClock`` model declares.
TABLE = "history_skippedclock"
_TRUE = frozenset({"1", "true", "yes", "on"})


def offset() -> timedelta:
    """How far the skipped clock is ahead of real time (zero before anything skipped)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT skipped FROM {TABLE} WHERE id = 1")
        row = cursor.fetchone()
    return row[0] if row else timedelta(0)


def skipped_now() -> datetime:
    """Real time plus the skipped offset: :func:`now` while time skipping is on."""
    return timezone.now() + offset()


# The database's real time as a statement reads it (Django's ``Now()`` on PostgreSQL).
DATABASE_NOW_SQL = "STATEMENT_TIMESTAMP()"
_SKIPPED_SQL = f"COALESCE((SELECT skipped FROM {TABLE} WHERE id = 1), interval '0')"


def database_now_sql() -> str:
    """SQL for the workflow now by the database's clock, for raw statements.

    Real time reads no row; the skipped clock adds its offset in the same statement, so a
    comparison with it costs no round trip of its own in either mode.
    """
    return f"({DATABASE_NOW_SQL} + {_SKIPPED_SQL})" if time_skipping() else DATABASE_NOW_SQL


def database_now() -> RawSQL:
    """:func:`database_now_sql` as an ORM expression (``fire_at__lte=clock.database_now()``)."""
    return RawSQL(database_now_sql(), [], output_field=DateTimeField())


def from_database(at: datetime) -> datetime:
    """The workflow time of ``at``, a real time the database read (the skipped clock adds
    its offset, one read; real time returns ``at`` as it is)."""
    return at + offset() if time_skipping() else at


def skip_to(target: datetime) -> timedelta:
    """Move the skipped clock forward so that it reads at least ``target``; return the offset.

    The offset never shrinks: a target already passed leaves it as it is, so two processes
    skipping at once cannot move the clock back.
    """
    return _grow("GREATEST(skipped, %s - %s)", [target, timezone.now()])


def skip_by(duration: timedelta) -> timedelta:
    """Move the skipped clock forward by ``duration`` (``env.sleep``); return the new offset."""
    if duration < timedelta(0):
        raise ValueError("the skipped clock only moves forward")
    return _grow("skipped + make_interval(secs => %s)", [duration.total_seconds()])


def _grow(expression: str, params: Sequence[datetime | float]) -> timedelta:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (id, skipped, skipping_locks) VALUES (1, interval '0', 0) "
            "ON CONFLICT (id) DO NOTHING"
        )
        cursor.execute(f"UPDATE {TABLE} SET skipped = {expression} WHERE id = 1 RETURNING skipped", params)
        row = cursor.fetchone()
    return row[0] if row else timedelta(0)


def _enabled_by_environment() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() in _TRUE


now: Callable[[], datetime] = skipped_now if _enabled_by_environment() else timezone.now


def set_time_skipping(enabled: bool) -> None:
    """Switch the mode of this process (tests); call sites read ``clock.now`` at each call."""
    global now
    now = skipped_now if enabled else timezone.now


def time_skipping() -> bool:
    """Whether this process keeps the skipped clock."""
    return now is skipped_now
