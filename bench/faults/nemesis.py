"""The nemesis: seeded faults against the stack's recorded processes, its database and
the data it is sent.

Each fault is a coroutine that injects, then waits for its recovery within a bound and
says whether it came (the fault is then *survived*; the checker judges the data after the
drain). The faults live in three mixins by what they act on: :mod:`.faults_process`,
:mod:`.faults_db`, :mod:`.faults_data`. Faults act on pids the stack recorded, never on
processes found by name. A paused process is always resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from sdk.client import Client

from .faults_base import FaultStats, sql
from .faults_clock import ClockFaults
from .faults_data import DataFaults
from .faults_db import DatabaseFaults
from .faults_process import ProcessFaults
from .load import Load
from .stack import Cluster, Stack

__all__ = ["FAULTS", "TITLES", "FaultStats", "Nemesis", "RangeSampler", "sql"]

FAULTS = (
    "worker_kill",
    "frontend_kill",
    "owner_kill",
    "pg_drop",
    "pg_restart",
    "owner_pause",
    "poison",
    "deploy",
    "storm",
    "payloads",
    "listen_drop",
    "conn_exhaust",
    "clock_jump",
)
TITLES = {
    "worker_kill": "SIGKILL SDK worker mid-activity",
    "frontend_kill": "SIGKILL frontend worker mid-request",
    "owner_kill": "SIGKILL shard owner, timers due",
    "pg_drop": "PostgreSQL connections dropped",
    "pg_restart": "PostgreSQL crash restart",
    "owner_pause": "SIGSTOP shard owner past lease",
    "poison": "poison activities (fail, refuse, hang)",
    "deploy": "nondeterministic deploy",
    "storm": "signal storm (500 at once)",
    "payloads": "payloads at the size limit",
    "listen_drop": "LISTEN connections dropped",
    "conn_exhaust": "PostgreSQL connection slots taken",
    "clock_jump": "shard owner clock jump (+20 s, back)",
}
# Faults that need the throwaway cluster: they crash or fill the whole server.
PRIVATE_ONLY = {"pg_restart", "conn_exhaust"}
STARTS_RUNS = {"poison", "deploy", "storm", "payloads", "listen_drop", "clock_jump"}


class RangeSampler:
    """Samples every shard's ``range_id`` while the run goes on: a regression is a fencing bug."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self.highest: dict[int, int] = {}
        self.samples = 0
        self.bumps = 0
        self.regressions: list[str] = []

    def sample(self) -> None:
        self.observe(sql(self.db_url, "SELECT shard_id, range_id FROM history_shard"))

    def observe(self, rows: list[tuple[Any, ...]]) -> None:
        """One sample of ``(shard_id, range_id)`` rows, compared with the highest seen."""
        self.samples += 1
        for shard, range_id in rows:
            seen = self.highest.get(shard)
            if seen is not None and range_id < seen:
                self.regressions.append(f"shard {shard}: range_id {range_id} after {seen}")
            elif seen is not None and range_id > seen:
                self.bumps += 1
            self.highest[shard] = max(range_id, seen or range_id)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            # The database may be down for a moment (a fault): sample again shortly.
            with contextlib.suppress(psycopg.Error):
                await asyncio.to_thread(self.sample)
            await asyncio.sleep(0.5)


class Nemesis(ProcessFaults, DatabaseFaults, DataFaults, ClockFaults):
    def __init__(
        self,
        stack: Stack,
        client: Client,
        cluster: Cluster | None,
        rng: random.Random,
        load: Load | None = None,
        only: list[str] | None = None,
    ) -> None:
        super().__init__(stack, client, cluster, rng, load)
        self.only = only
        self.stats = {name: FaultStats() for name in self.kinds()}
        self.exits: list[str] = []  # processes that exited by themselves: each a finding

    def kinds(self) -> list[str]:
        """The faults this run injects: all those the stack allows (or the ``only`` ones);
        those that start runs need the load."""
        kinds = [f for f in FAULTS if f not in PRIVATE_ONLY or self.cluster is not None]
        if self.stack.clock_file is None:  # only with --clock: no faked clock, no jump
            kinds.remove("clock_jump")
        if self._load is None:
            kinds = [f for f in kinds if f not in STARTS_RUNS]
        return [f for f in kinds if self.only is None or f in self.only]

    async def run(self, rounds: int, stop: asyncio.Event) -> None:
        """``rounds`` times every fault, in a seeded order, with quiet gaps between them."""
        for _ in range(rounds):
            order = self.kinds()
            self.rng.shuffle(order)
            for fault in order:
                await asyncio.sleep(self.rng.uniform(0.5, 2.0))
                await self.inject(fault)
                await asyncio.to_thread(self.revive)
        stop.set()

    def revive(self) -> None:
        """Start again any process of the stack that exited without the nemesis killing it,
        and note it: a process that dies of a fault it should ride out is a finding."""
        for name, process in list(self.stack.group.processes.items()):
            code = process.poll()
            if code is not None:
                self.exits.append(f"{name} exited by itself with code {code}")
                self.note("revive", "restarted", process=name, code=code)
                self.stack.restart(name)

    async def inject(self, fault: str) -> None:
        actions: dict[str, Callable[[], Awaitable[bool]]] = {name: getattr(self, name) for name in FAULTS}
        stats = self.stats[fault]
        stats.injected += 1
        self.note(fault, "start")
        if self._load is not None:
            self.load.phase = fault
        began = time.monotonic()
        try:
            ok = await actions[fault]()
        except Exception as exc:  # a fault's own failure is a finding, not a crash of the run
            ok = False
            stats.notes.append(repr(exc)[:200])
        finally:
            if self._load is not None:
                self.load.phase = ""
        stats.survived += int(ok)
        self.note(fault, "stop", survived=ok, seconds=round(time.monotonic() - began, 2))
