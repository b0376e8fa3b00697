"""Wake-ups for waiting polls: one LISTEN connection per process, fanned out in memory.

NOTIFY is lost if the connection drops, so waiters also re-check on a short safety
interval; correctness never depends on a notification arriving.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

import psycopg

from history.kernel._mutation import HISTORY_CHANNEL, TASKS_CHANNEL

log = logging.getLogger("chronicle.longpoll")


class WakeupHub:
    """Per-process registry of waiters keyed by a NOTIFY payload."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._conninfo: str | None = None

    def ensure_listening(self, conninfo: str) -> None:
        self._conninfo = conninfo
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        while True:
            try:
                assert self._conninfo is not None
                async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {TASKS_CHANNEL}")
                    await conn.execute(f"LISTEN {HISTORY_CHANNEL}")
                    async for note in conn.notifies():
                        self.wake(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("LISTEN connection lost; reconnecting")
                await asyncio.sleep(0.5)

    def wake(self, key: str) -> None:
        for event in self._waiters.get(key, ()):
            event.set()

    async def wait(self, key: str, timeout: float) -> bool:
        """Wait until ``key`` is notified or ``timeout`` passes; True if notified."""
        event = asyncio.Event()
        self._waiters[key].add(event)
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiters[key].discard(event)
            if not self._waiters[key]:
                del self._waiters[key]


hub = WakeupHub()
