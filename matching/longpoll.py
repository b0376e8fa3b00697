"""Wake-ups for waiting polls: one LISTEN connection per process, fanned out in memory.

A history (or query) notification wakes every waiter of its key: each long-poll of a run's
history wants every new event. A task notification names how many tasks it announces
and wakes that many waiting polls of the queue, the longest waiting first: waking every
poller of a busy queue for one task sent all of them to the database for one row, and the
losers straight back to waiting. Each process wakes its own share, so with several
frontends a task may wake one poll in each; the first to claim it wins.

NOTIFY is lost if the connection drops, so waiters also re-check on a short safety
interval; correctness never depends on a notification arriving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from itertools import islice
from typing import Any

import psycopg

from history.kernel.wakeups import HISTORY_CHANNEL, TASKS_CHANNEL, parse_history_wakeup, parse_task_wakeup

log = logging.getLogger("chronicle.longpoll")


class Wakeup(asyncio.Event):
    """A waiter's event, and what the notification that set it carried beyond its key."""

    detail = ""


class WakeupHub:
    """Per-process registry of waiters keyed by a NOTIFY payload."""

    def __init__(self) -> None:
        # Per key, in the order the waiters arrived (a dict keeps insertion order).
        self._waiters: dict[str, dict[Wakeup, None]] = defaultdict(dict)
        self._task: asyncio.Task[None] | None = None
        self._conninfo: str | None = None

    def ensure_listening(self, conninfo: str) -> None:
        self._conninfo = conninfo
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        lost_since: float | None = None
        while True:
            try:
                assert self._conninfo is not None
                async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {TASKS_CHANNEL}")
                    await conn.execute(f"LISTEN {HISTORY_CHANNEL}")
                    if lost_since is not None:
                        log.warning("LISTEN connection back after %.1f s", time.monotonic() - lost_since)
                        lost_since = None
                    await self._deliver_until_lost(conn.pgconn)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # A cancel that psycopg surfaced as its own error (the loop is closing):
                    # reconnecting would swallow it and keep the loop from ever closing.
                    raise
                lost_since = self._note_lost(error, lost_since)
                await asyncio.sleep(0.5)

    @staticmethod
    def _note_lost(error: Exception, lost_since: float | None) -> float:
        """Log a lost LISTEN connection once per outage, not on every retry (a PostgreSQL
        restart meant a traceback every half second); an unexpected error in full."""
        if not isinstance(error, psycopg.Error | OSError):
            log.exception("LISTEN listener failed; reconnecting")
        elif lost_since is None:
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            log.warning(
                "LISTEN connection lost (%s); reconnecting (waiting polls re-check on their own)",
                first_line,
            )
        return time.monotonic() if lost_since is None else lost_since

    async def _deliver_until_lost(self, pgconn: Any) -> None:
        """Wake the waiters of every notification that arrives, until the connection fails.

        The socket is watched by the event loop once, and each time it is readable a
        callback reads every notification waiting on it and delivers them in one go, on
        the loop's own stack: no task, timer or event per readable socket. (psycopg's
        ``notifies()`` generator registered and dropped a reader and a timer for each
        notification, and a wait with a timeout per readable socket cost about as much
        as the delivery itself: in a storm of wake-ups, a tenth of a frontend's CPU.)
        The listener waits on one future, which the callback fails when the connection
        does, and which a cancel of the listener cancels.
        """
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()
        socket = pgconn.socket

        def on_readable() -> None:
            try:
                pgconn.consume_input()  # raises once the connection has failed
                while (note := pgconn.notifies()) is not None:
                    self._deliver(note.relname.decode(errors="replace"), note.extra.decode(errors="replace"))
            except Exception as error:  # the listener reconnects (and logs why)
                loop.remove_reader(socket)
                if not lost.done():
                    lost.set_exception(error)

        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # A cancel psycopg took in for its own (connecting, or LISTEN) and did not
            # raise: seen when the loop closes while notifications arrive. Waiting now
            # would hold the closing loop forever; honour it.
            raise asyncio.CancelledError
        loop.add_reader(socket, on_readable)
        try:
            await lost
        finally:
            loop.remove_reader(socket)

    def _deliver(self, channel: str, payload: str) -> None:
        if channel != TASKS_CHANNEL:
            key, detail = parse_history_wakeup(payload)
            self.wake(key, detail=detail)
            return
        try:
            key, count = parse_task_wakeup(payload)
        except ValueError:
            log.warning("ignoring a task wake-up that is not Chronicle's: %r", payload[:200])
            return
        self.wake(key, count)

    def wake(self, key: str, count: int | None = None, *, detail: str = "") -> None:
        """Wake the waiters of ``key``: all of them, or the ``count`` that waited longest,
        handing each the notification's ``detail``.

        A woken waiter leaves the registry at once, so the next wake-up of the key goes
        to waiters not yet woken.
        """
        waiters = self._waiters.get(key)
        if not waiters:
            return
        chosen = list(waiters if count is None else islice(waiters, count))
        for event in chosen:
            del waiters[event]
            event.detail = detail
            event.set()
        if not waiters:
            del self._waiters[key]

    def subscribe(self, key: str) -> Wakeup:
        """Join ``key``'s waiters now (at the back of the line); the event is set when woken.

        Subscribe *before* looking for the work, then wait on the event: a notification
        sent between the look and the wait then sets the event instead of being missed
        (which would cost the caller a safety re-check interval). Always pair it with
        :meth:`unsubscribe`.
        """
        event = Wakeup()
        self._waiters[key][event] = None
        return event

    def unsubscribe(self, key: str, event: Wakeup) -> None:
        waiters = self._waiters.get(key)
        if waiters is not None:
            waiters.pop(event, None)
            if not waiters:
                del self._waiters[key]

    async def wait(
        self,
        key: str,
        timeout: float,
        ready: Callable[[], Awaitable[bool]] | None = None,
        detail: Callable[[str], None] | None = None,
    ) -> bool:
        """Wait until ``key`` is notified or ``timeout`` passes; True if notified.

        ``ready``, when given, is the caller's own look for what it waits for, run once
        after subscribing: True from it returns at once, and a notification sent while it
        ran is not lost. ``detail``, when given, receives what the notification carried
        beyond its key, if anything (a close carries itself).
        """
        event = self.subscribe(key)
        try:
            if ready is not None and await ready():
                return True
            await asyncio.wait_for(event.wait(), timeout)
            if detail is not None and event.detail:
                detail(event.detail)
            return True
        except TimeoutError:
            return False
        finally:
            self.unsubscribe(key, event)


hub = WakeupHub()
