"""Closes seen in this process: a workflow started eagerly here learns its result locally.

When a client starts a workflow with ``request_eager_start`` and a worker built on the
same client takes the first task, the run usually stays with that worker (its sticky
queue) until it closes. The server's answer to the completion that closes it carries the
close event, durable by then; the worker hands it here, and the handle's ``result()``
returns it without asking the server again. If the run leaves this worker (evicted from
its cache, a failed task) or takes longer than a short grace, ``result()`` asks the
server as it always does, so nothing depends on this shortcut being taken.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

# How long result() waits for a local close before it asks the server.
LOCAL_CLOSE_GRACE_SECONDS = 10.0
# Runs remembered at most: a run started eagerly whose result is never asked for is
# forgotten once this many newer ones were started (its result() then asks the server).
MAX_REMEMBERED_RUNS = 10_000


class LocalCloses:
    """Futures of eagerly started runs, resolved by this process's worker."""

    def __init__(self) -> None:
        self._runs: dict[str, asyncio.Future[dict[str, Any] | None]] = {}

    def expect(self, run_id: str) -> None:
        """A run started eagerly in this process: its close may be seen here."""
        self._runs[run_id] = asyncio.get_running_loop().create_future()
        while len(self._runs) > MAX_REMEMBERED_RUNS:
            del self._runs[next(iter(self._runs))]

    def closed(self, run_id: str, close: dict[str, Any]) -> None:
        """The server accepted a completion of ``run_id`` that closed it (``close`` holds the
        close event and the run that carries on, if any)."""
        self._settle(run_id, close)

    def left(self, run_id: str) -> None:
        """The run is no longer run by this process's worker: its close will not be seen here."""
        self._settle(run_id, None)

    def _settle(self, run_id: str, close: dict[str, Any] | None) -> None:
        future = self._runs.get(run_id)
        if future is not None and not future.done():
            future.set_result(close)

    async def wait(self, run_id: str | None) -> dict[str, Any] | None:
        """The close of ``run_id`` if this process sees it within the grace, else None."""
        future = self._runs.get(run_id) if run_id else None
        if future is None:
            return None
        try:
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(future), LOCAL_CLOSE_GRACE_SECONDS)
            return None
        finally:
            self._runs.pop(str(run_id), None)
