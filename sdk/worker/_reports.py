"""A worker's task reports: sent at once while few are on their way; the rest together.

A report (a workflow task's completion or failure, an activity's outcome, a query's
answer) is sent at once when fewer than two are on their way. Reports made meanwhile
wait for one of those and then go together in one request (the server's ``.../responses``), each
answered as it would have been alone. So a lone worker waits for nothing it did not wait
for before, and a busy one sends one request where it sent many. Each report's answer or
error reaches its caller as if it had been sent alone, so retries and refusals are
handled by the caller as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from sdk._http import HttpTransport, error_from

MAX_BATCH = 64  # the server's limit
# Requests on their way at once; reports made while they are wait for the next one.
MAX_IN_FLIGHT = 2
# A report waiting to be sent: its kind (the path under the queue), body and answer.
Waiting = tuple[str, dict[str, Any], "asyncio.Future[dict[str, Any] | None]"]


class ReportBatcher:
    """Sends the reports of one worker's task queue (paths under ``base``)."""

    def __init__(self, transport: HttpTransport, base: str) -> None:
        self.transport = transport
        self.base = base
        self._in_flight = 0
        self._waiting: list[Waiting] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """Send one report (``path`` under ``base``); its answer, or its error raised."""
        if not path.startswith(self.base):
            return await self.transport.post(path, body, retry=False)
        if self._in_flight < MAX_IN_FLIGHT:
            self._in_flight += 1
            try:
                return await self.transport.post(path, body, retry=False)
            finally:
                self._send_waiting()
        answer: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        self._waiting.append((path.removeprefix(self.base), body, answer))
        return await answer

    def _send_waiting(self) -> None:
        """With one report's answer in, send what waited meanwhile, together (or nothing)."""
        batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
        if not batch:
            self._in_flight -= 1
            return
        sending = asyncio.get_running_loop().create_task(self._send(batch))
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[Waiting]) -> None:
        try:
            if len(batch) == 1:
                kind, body, answer = batch[0]
                await _settle(answer, self.transport.post(self.base + kind, body, retry=False))
            else:
                await self._send_together(batch)
        finally:
            self._send_waiting()

    async def _send_together(self, batch: list[Waiting]) -> None:
        reports = {"responses": [{"kind": kind, "body": body} for kind, body, _ in batch]}
        try:
            reply = await self.transport.post(self.base + "responses", reports, retry=False)
        except Exception as exc:  # the request failed: each caller sees it, and retries
            for _, _, answer in batch:
                answer.set_exception(exc)
            return
        for (_, _, answer), result in zip(batch, (reply or {}).get("responses") or [], strict=True):
            if result["status"] == 200:
                answer.set_result(result.get("body"))
            else:
                error = error_from(result["status"], result.get("body"), result.get("retry_after"))
                answer.set_exception(error)


async def _settle(answer: asyncio.Future[Any], request: Awaitable[Any]) -> None:
    """Settle ``answer`` with what ``request`` answers or raises."""
    try:
        answer.set_result(await request)
    except Exception as exc:
        answer.set_exception(exc)
