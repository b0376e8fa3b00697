"""The shard owner's sleep ends early for a timer due within it, and only for one: a task's
timeout timer seconds ahead (one per started workflow task) is noted and slept through.

On the real PostgreSQL, with the owner's own LISTEN connection and notifications sent as a
kernel write sends them (at commit, on the timers channel).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from history.kernel.wakeups import TIMERS_CHANNEL
from history.shard_owner import ShardOwner
from tests.conftest import database_conninfo

pytestmark = pytest.mark.django_db

SHARD = 3
SLEEP = 0.6


@pytest.fixture
def listen(django_db_setup: Any) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_conninfo(), autocommit=True) as conn:
        conn.execute(f"LISTEN {TIMERS_CHANNEL}")
        yield conn


@pytest.fixture
def owner() -> ShardOwner:
    owner = ShardOwner("sleeper")
    owner.owned = {SHARD: 1}
    return owner


def _notify(other_connection: psycopg.Connection[Any], payload: str) -> None:
    with other_connection.transaction():
        other_connection.execute("SELECT pg_notify(%s, %s)", [TIMERS_CHANNEL, payload])


def _slept(owner: ShardOwner, listen: psycopg.Connection[Any]) -> float:
    started = time.monotonic()
    owner.wait_for_timers(listen, SLEEP)
    return time.monotonic() - started


def _in(owner: ShardOwner, seconds: float) -> str:
    return f"{SHARD}|{(owner.database_now() + timedelta(seconds=seconds)).timestamp()}"


def test_a_timer_due_within_the_sleep_ends_it(
    owner: ShardOwner, listen: psycopg.Connection[Any], other_connection: psycopg.Connection[Any]
) -> None:
    _notify(other_connection, _in(owner, 0.05))
    assert _slept(owner, listen) < SLEEP / 2
    assert owner.next_fire[SHARD] is not None


def test_a_timer_due_after_the_sleep_is_noted_and_slept_through(
    owner: ShardOwner, listen: psycopg.Connection[Any], other_connection: psycopg.Connection[Any]
) -> None:
    later = _in(owner, 10)
    _notify(other_connection, later)
    assert _slept(owner, listen) >= SLEEP * 0.9
    noted = owner.next_fire[SHARD]
    assert noted is not None and abs(noted.timestamp() - float(later.split("|")[1])) < 1e-3


def test_a_timer_of_a_shard_owned_elsewhere_does_not_wake_it(
    owner: ShardOwner, listen: psycopg.Connection[Any], other_connection: psycopg.Connection[Any]
) -> None:
    _notify(other_connection, f"{SHARD + 1}|{owner.database_now().timestamp()}")
    assert _slept(owner, listen) >= SLEEP * 0.9
    assert SHARD + 1 not in owner.next_fire


def test_a_bare_nudge_ends_the_sleep(
    owner: ShardOwner, listen: psycopg.Connection[Any], other_connection: psycopg.Connection[Any]
) -> None:
    """What a test stack skipping time sends (``time_skipping_api``)."""
    _notify(other_connection, "")
    assert _slept(owner, listen) < SLEEP / 2
