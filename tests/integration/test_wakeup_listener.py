"""The LISTEN hub on a real PostgreSQL connection: every notification of a burst is
delivered, a payload that is not Chronicle's is skipped, and a lost connection is made
again with nothing after it missed."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import psycopg
import pytest

from history.kernel.wakeups import HISTORY_CHANNEL, TASKS_CHANNEL, task_wakeup_payload
from matching.longpoll import WakeupHub
from tests.conftest import database_conninfo


def _notify(conn: psycopg.Connection[Any], *notes: tuple[str, str]) -> None:
    """Send the notifications in one transaction (delivered together at its commit)."""
    with conn.transaction():
        for channel, payload in notes:
            conn.execute("SELECT pg_notify(%s, %s)", [channel, payload])


async def _listening(hub: WakeupHub, key: str) -> None:
    """Until the hub's connection listens (a probe notification reaches a waiter)."""
    with psycopg.connect(database_conninfo(), autocommit=True) as probe:
        for _ in range(100):
            waiting = asyncio.ensure_future(hub.wait(key, timeout=0.1))
            await asyncio.sleep(0.01)
            _notify(probe, (HISTORY_CHANNEL, key))
            if await waiting:
                return
    raise AssertionError("the hub never listened")


def test_a_burst_is_delivered_whole_and_a_foreign_payload_is_skipped(other_connection: Any) -> None:
    async def story() -> None:
        hub = WakeupHub()
        hub.ensure_listening(database_conninfo())
        await _listening(hub, "probe-1")
        polls = [asyncio.ensure_future(hub.wait("queue", timeout=5)) for _ in range(3)]
        readers = [asyncio.ensure_future(hub.wait("run-1", timeout=5)) for _ in range(2)]
        await asyncio.sleep(0.05)
        _notify(
            other_connection,
            (TASKS_CHANNEL, "not-ours"),
            (TASKS_CHANNEL, task_wakeup_payload("queue", 2)),
            (HISTORY_CHANNEL, "run-1"),
        )
        assert all(await asyncio.gather(*readers)), "every reader of the run woke"
        await asyncio.sleep(0.2)
        assert sum(p.done() for p in polls) == 2, "the counted wake-up woke two polls of three"
        for poll in polls:
            poll.cancel()

    asyncio.run(story())


@pytest.mark.django_db(transaction=True)
def test_a_lost_listen_connection_is_made_again(
    other_connection: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="chronicle.longpoll")

    async def story() -> None:
        hub = WakeupHub()
        hub.ensure_listening(database_conninfo())
        await _listening(hub, "probe-2")
        other_connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query LIKE 'LISTEN%%' AND pid <> pg_backend_pid() AND datname = current_database()"
        )
        other_connection.commit()
        await _listening(hub, "probe-3")  # the hub listens again
        reader = asyncio.ensure_future(hub.wait("run-2", timeout=5))
        await asyncio.sleep(0.05)
        _notify(other_connection, (HISTORY_CHANNEL, "run-2"))
        assert await reader

    asyncio.run(story())
    # An operator reads one line when it is lost and one when it is back, no traceback.
    texts = [r.getMessage() for r in caplog.records]
    assert len(texts) == 2, texts
    assert texts[0].startswith("LISTEN connection lost (") and texts[1].startswith(
        "LISTEN connection back after"
    )
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]
    assert not any(r.exc_info for r in caplog.records)


def test_the_listener_stops_when_its_loop_closes_while_notifications_arrive(other_connection: Any) -> None:
    """A loop that closes cancels the listener; with notifications streaming in, the cancel
    was once lost and the loop waited for the listener forever."""
    streaming = threading.Event()

    def stream() -> None:
        with psycopg.connect(database_conninfo(), autocommit=True) as sender:
            while not streaming.is_set():
                sender.execute("SELECT pg_notify(%s, 'x')", [HISTORY_CHANNEL])
                time.sleep(0.0005)

    sender = threading.Thread(target=stream, daemon=True)
    sender.start()
    hub = WakeupHub()

    async def listen_a_moment(i: int) -> None:
        hub.ensure_listening(database_conninfo())
        await asyncio.sleep(0.002 * (i % 10))

    try:
        for i in range(60):
            closing = threading.Thread(target=asyncio.run, args=(listen_a_moment(i),), daemon=True)
            closing.start()
            closing.join(10)
            assert not closing.is_alive(), f"the loop never closed (round {i})"
    finally:
        streaming.set()
        sender.join(5)
