"""Faults on the database: every connection dropped, a crash restart, the LISTEN
connections dropped (wake-ups must still come, by the safety re-check), and the server's
connection slots taken (the frontend must answer 503 with Retry-After, not hang).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime
from typing import Any

import httpx
import psycopg

from .faults_base import NemesisBase
from .load import TIMER_SECONDS, Op
from .stack import FRONTEND_APP, NAMESPACE

# The LISTEN connections of the run's database: each process's wake-up listener (its last
# statement a LISTEN; it never runs another).
LISTENERS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    " AND query ILIKE 'LISTEN%%' AND pid <> pg_backend_pid()"
)
TERMINATE_LISTENERS = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
    " AND query ILIKE 'LISTEN%%' AND pid <> pg_backend_pid()"
)
LISTEN_HOLD = 6.0  # seconds the listeners are kept down (ended again as they come back)
WAKEUP_BOUND = 2.5  # a task or timer with no NOTIFY is seen within the re-check interval (1 s), plus slack
HOLD_SLOTS = 7.0  # seconds every free connection slot is held: past the stack's 5 s pool timeout
# F17: a call gets its answer within 2 s though the slots are taken (the frontend's pool's
# first refused connection starts the outage: checkouts then wait 1 s, and one already
# waiting is failed within two of those), plus 0.5 s for the HTTP round trip and a
# frontend busy with the load's calls.
ANSWER_BOUND = 2.5
HOG_APP = "faults-hog"


def seconds_between(earlier: str, later: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


def wakeups(events: list[dict[str, Any]]) -> dict[str, float]:
    """From a one-timer run's history: how long its workflow tasks waited to be picked up and
    how late its timer fired (event times are the server's)."""
    figures: dict[str, float] = {}
    scheduled: str | None = None
    timer: str | None = None
    for event in events:
        kind, at = event["event_type"], event["event_time"]
        if kind == "WorkflowTaskScheduled":
            scheduled = at
        elif kind == "WorkflowTaskStarted" and scheduled is not None:
            figures["task pickup s"] = max(figures.get("task pickup s", 0.0), seconds_between(scheduled, at))
        elif kind == "TimerStarted":
            timer = at
        elif kind == "TimerFired" and timer is not None:
            figures["timer late s"] = seconds_between(timer, at) - TIMER_SECONDS
    return figures


class DatabaseFaults(NemesisBase):
    async def pg_drop(self) -> bool:
        rows = await self.db(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        self.note("pg_drop", "terminated", backends=len(rows))
        return await self.api_answers(30)

    async def pg_restart(self) -> bool:
        assert self.cluster is not None
        await asyncio.to_thread(self.cluster.crash_and_restart, 1.0)
        self.note("pg_restart", "restarted")
        return await self.api_answers(45)

    async def listen_drop(self) -> bool:
        """End every LISTEN connection, again each time one comes back, for
        :data:`LISTEN_HOLD` seconds, while two one-timer runs start and finish: their tasks
        and timer must be seen by the re-check, within :data:`WAKEUP_BOUND`; then the
        listeners must be back."""
        stats = self.stats["listen_drop"]
        before = len(await self.db(LISTENERS))
        ended = 0
        probes: list[asyncio.Task[Op]] = []
        began = time.monotonic()
        while time.monotonic() - began < LISTEN_HOLD:
            ended += sum(bool(r[0]) for r in await self.db(TERMINATE_LISTENERS))
            if len(probes) < 2 and time.monotonic() - began > 0.3 + 2.0 * len(probes):
                wid = self.wid("listen")
                probes.append(asyncio.create_task(self.load.start("FaultsChain", wid, [1, TIMER_SECONDS])))
            await asyncio.sleep(0.2)
        ops = await asyncio.gather(*probes)
        self.note("listen_drop", "held", listeners_before=before, ended=ended)
        ok = ended > 0 and all(op.outcome == "ok" for op in ops)
        if ended == 0:
            stats.notes.append("no LISTEN connection found to end")
        status = await self.closed([op.workflow_id for op in ops], 30)
        for op in ops:
            if status.get(op.workflow_id) != "COMPLETED":
                stats.notes.append(f"probe run {status.get(op.workflow_id)} after 30 s")
                ok = False
                continue
            for name, value in wakeups(await self.events(op.workflow_id)).items():
                stats.figure(name, value)
                if value > WAKEUP_BOUND:
                    stats.notes.append(f"{name} {value:.2f} > {WAKEUP_BOUND} s without LISTEN")
                    ok = False
        deadline = time.monotonic() + 10
        back = 0
        while time.monotonic() < deadline:
            back = len(await self.db(LISTENERS))
            if back >= before:
                break
            await asyncio.sleep(0.3)
        stats.figure("listeners back s", time.monotonic() - deadline + 10)
        if back < before:
            stats.notes.append(f"{back} of {before} LISTEN connections back after 10 s")
        return ok and back >= before

    # -- connection exhaustion ----------------------------------------------------
    def _grab(self, held: list[psycopg.Connection[Any]], until: float) -> None:
        """Open connections until the server refuses one, and keep doing so until ``until``
        (monotonic): a slot that frees (a process's connection ended) is taken again."""
        while True:
            try:
                held.append(
                    psycopg.connect(
                        self.stack.db_url, autocommit=True, connect_timeout=3, application_name=HOG_APP
                    )
                )
                continue
            except psycopg.OperationalError:
                pass
            if time.monotonic() >= until or len(held) > 500:
                return
            time.sleep(0.05)

    @staticmethod
    def _end_frontend(conn: psycopg.Connection[Any]) -> int:
        """End the frontend's pooled connections (not its LISTEN one, which has no name)."""
        query = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s"
        return len(conn.execute(query, (FRONTEND_APP,)).fetchall())

    async def _ask(self, http: httpx.AsyncClient, answers: list[tuple[int, str, float]]) -> None:
        began = time.monotonic()
        try:
            reply = await http.get("/workflow-count", timeout=30)
            answers.append(
                (reply.status_code, reply.headers.get("retry-after", ""), time.monotonic() - began)
            )
        except httpx.HTTPError as exc:
            answers.append((0, type(exc).__name__, time.monotonic() - began))

    async def conn_exhaust(self) -> bool:
        """Take every free connection slot of the server, end the frontend's own connections
        (its pool must then open new ones, which the server refuses), hold for
        :data:`HOLD_SLOTS` seconds while asking the API every 0.25 s: every answer must come
        within :data:`ANSWER_BOUND`, a 2xx or a 503 with Retry-After (the frontend's
        connections are ended again each second); then release: the API answers again."""
        stats = self.stats["conn_exhaust"]
        held: list[psycopg.Connection[Any]] = []
        await asyncio.to_thread(self._grab, held, 0.0)
        if not held:
            stats.notes.append("no connection slot could be taken")
            return False
        ended = self._end_frontend(held[0])
        # Take the slots those connections held before the frontend opens new ones (it does
        # so only when a call needs one), then keep taking any that frees while asking; the
        # frontend's connections are ended again each second, so its pool must keep asking
        # a full server for new ones.
        await asyncio.to_thread(self._grab, held, time.monotonic() + 1.0)
        until = time.monotonic() + HOLD_SLOTS
        filling = asyncio.create_task(asyncio.to_thread(self._grab, held, until))
        answers: list[tuple[int, str, float]] = []
        base = f"{self.stack.url}/api/v1/namespaces/{NAMESPACE}"
        headers = {"Authorization": f"Bearer {self.stack.key}"}
        async with httpx.AsyncClient(base_url=base, headers=headers) as http:
            asks = []
            while time.monotonic() < until:
                asks.append(asyncio.create_task(self._ask(http, answers)))
                if len(asks) % 4 == 0:
                    ended += self._end_frontend(held[0])
                await asyncio.sleep(0.25)
            await filling
            total = len(held)
            await asyncio.gather(*asks)
        for conn in held:
            with contextlib.suppress(psycopg.Error):
                conn.close()
        self.note("conn_exhaust", "released", slots=total, frontend_ended=ended, answers=answers)
        refused = [a for a in answers if a[0] == 503]
        bad = [a for a in answers if not (200 <= a[0] < 300 or (a[0] == 503 and a[1]))]
        slow = [a for a in answers if a[2] > ANSWER_BOUND]
        stats.figure("slots held", total)
        stats.figure("503 answers", len(refused))
        stats.figure("answer s", max(a[2] for a in answers))
        if bad:
            stats.notes.append(f"answers not 2xx nor 503+Retry-After: {sorted({a[:2] for a in bad})}")
        if slow:
            stats.notes.append(f"{len(slow)} answer(s) slower than {ANSWER_BOUND} s")
        if not refused:
            stats.notes.append("no 503 while the slots were held (a pooled connection served)")
        return not bad and not slow and await self.api_answers(30)
