"""The nemesis: seeded faults against the stack's recorded processes and its database.

Each fault is a coroutine that injects, then waits for its recovery within a bound and
says whether it came (the fault is then *survived*; the checker judges the data after the
drain). Faults act on pids the stack recorded (a gunicorn worker is a child of the
recorded master), never on processes found by name. A paused process is always resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from sdk.client import Client

from .stack import LEASE_SECONDS, OWNERS, WORKERS, Cluster, Stack

FAULTS = ("worker_kill", "frontend_kill", "owner_kill", "pg_drop", "pg_restart", "owner_pause")
TITLES = {
    "worker_kill": "SIGKILL SDK worker mid-activity",
    "frontend_kill": "SIGKILL frontend worker mid-request",
    "owner_kill": "SIGKILL shard owner, timers due",
    "pg_drop": "PostgreSQL connections dropped",
    "pg_restart": "PostgreSQL crash restart",
    "owner_pause": "SIGSTOP shard owner past lease",
}
# A live owner renews every lease a third of the way through: renewed after ``since``, a
# lease runs past ``since`` plus a whole lease.
STALE_SHARDS = (
    "SELECT count(*) FROM history_shard WHERE owner = '' OR lease_expires_at IS NULL"
    f" OR lease_expires_at < %s + interval '{LEASE_SECONDS} s'"
)
SHARDS_BY_OWNER = "SELECT owner, count(*) FROM history_shard GROUP BY owner ORDER BY 2 DESC"
TIMERS_DUE = "SELECT count(*) FROM history_timertask WHERE fire_at < now() + interval '2 s'"
HEARTBEAT_AGES = (
    "SELECT owner, round(extract(epoch FROM now() - heartbeat_at)::numeric, 1)::text"
    " FROM history_shardownerprocess ORDER BY owner"
)
TAKEN_OVER = "SELECT count(*) FROM history_shard WHERE shard_id = ANY(%s) AND owner NOT IN (%s, '')"


@dataclass
class FaultStats:
    injected: int = 0
    survived: int = 0
    notes: list[str] = field(default_factory=list)


def sql(db_url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One short autocommit statement on a connection of its own (the stack's may be cut)."""
    with psycopg.connect(
        db_url, autocommit=True, connect_timeout=5, application_name="faults-nemesis"
    ) as conn:
        cur = conn.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


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


class Nemesis:
    def __init__(self, stack: Stack, client: Client, cluster: Cluster | None, rng: random.Random) -> None:
        self.stack = stack
        self.client = client
        self.cluster = cluster
        self.rng = rng
        self.stats: dict[str, FaultStats] = {name: FaultStats() for name in self.kinds()}
        self.log = (stack.run_dir / "nemesis.jsonl").open("a", encoding="utf-8")
        self.exits: list[str] = []  # processes that exited by themselves: each a finding

    def kinds(self) -> list[str]:
        return [f for f in FAULTS if f != "pg_restart" or self.cluster is not None]

    def note(self, fault: str, phase: str, **fields: Any) -> None:
        self.log.write(json.dumps({"t": time.time(), "fault": fault, "phase": phase, **fields}) + "\n")
        self.log.flush()

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
        actions: dict[str, Callable[[], Awaitable[bool]]] = {
            "worker_kill": self.worker_kill,
            "frontend_kill": self.frontend_kill,
            "owner_kill": self.owner_kill,
            "pg_drop": self.pg_drop,
            "pg_restart": self.pg_restart,
            "owner_pause": self.owner_pause,
        }
        stats = self.stats[fault]
        stats.injected += 1
        self.note(fault, "start")
        began = time.monotonic()
        try:
            ok = await actions[fault]()
        except Exception as exc:  # a fault's own failure is a finding, not a crash of the run
            ok = False
            stats.notes.append(repr(exc)[:200])
        stats.survived += int(ok)
        self.note(fault, "stop", survived=ok, seconds=round(time.monotonic() - began, 2))

    # -- recovery probes ----------------------------------------------------------
    async def api_answers(self, within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(self.client.count_workflows(), timeout=5)
                return True
            except Exception:
                await asyncio.sleep(0.5)
        return False

    async def shards_owned(self, since: datetime, within: float) -> bool:
        """Every shard's lease renewed or taken after ``since`` (database time): a live owner
        holds each one again. (A dead owner's lease stays valid until it expires, so "no
        lease expired" alone would pass at once.)"""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                rows = await asyncio.to_thread(sql, self.stack.db_url, STALE_SHARDS, (since,))
                if rows and rows[0][0] == 0:
                    return True
            await asyncio.sleep(0.5)
        return False

    def db_now(self) -> datetime:
        when: datetime = sql(self.stack.db_url, "SELECT now()")[0][0]
        return when

    def owners_by_shards(self) -> list[tuple[str, int]]:
        rows = sql(
            self.stack.db_url, "SELECT owner, count(*) FROM history_shard GROUP BY owner ORDER BY 2 DESC"
        )
        return [(str(r[0]), int(r[1])) for r in rows if r[0] in OWNERS]

    # -- the faults ---------------------------------------------------------------
    def in_flight(self, pid: int) -> bool:
        """Whether the worker ``pid`` has begun an activity it has not ended (its effect ledger)."""
        path: Path = self.stack.effects
        if not path.exists():
            return False
        open_keys: set[str] = set()
        for line in path.read_text(encoding="utf-8").splitlines()[-400:]:
            entry = json.loads(line)
            if entry["pid"] == pid:
                (open_keys.add if entry["phase"] == "begin" else open_keys.discard)(entry["key"])
        return bool(open_keys)

    async def worker_kill(self) -> bool:
        name = self.rng.choice(WORKERS)
        pid = self.stack.pid(name)
        deadline = time.monotonic() + 15
        while not self.in_flight(pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        mid = self.in_flight(pid)
        os.kill(pid, signal.SIGKILL)
        self.note("worker_kill", "killed", pid=pid, mid_activity=mid)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(self.stack.restart, name)
        await asyncio.sleep(2.0)
        alive = self.stack.group.processes[name].poll() is None
        if not mid:
            self.stats["worker_kill"].notes.append("no activity in flight within 15 s")
        return alive and mid

    def connections_of(self, pid: int) -> int:
        """Client connections the process holds on the frontend's port (its long-polls, at least);
        -1 when ``ss`` is not installed."""
        command = ["ss", "-Htnp", "state", "established", f"( sport = :{self.stack.port} )"]
        try:
            listing = subprocess.run(command, capture_output=True, text=True, check=False).stdout
        except FileNotFoundError:
            return -1
        return sum(f"pid={pid}," in line for line in listing.splitlines())

    async def frontend_kill(self) -> bool:
        before = self.stack.frontend_workers()
        if not before:
            return False
        victim = self.rng.choice(before)
        held = self.connections_of(victim)
        os.kill(victim, signal.SIGKILL)
        self.note("frontend_kill", "killed", pid=victim, connections=held)
        if not held:
            self.stats["frontend_kill"].notes.append("a worker held no client connection when killed")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            now = self.stack.frontend_workers()
            if victim not in now and len(now) >= len(before):
                return await self.api_answers(20)
            await asyncio.sleep(0.2)
        return False

    async def wait_for_due_timers(self, within: float) -> int:
        deadline = time.monotonic() + within
        count = 0
        while time.monotonic() < deadline:
            rows = await asyncio.to_thread(
                sql,
                self.stack.db_url,
                TIMERS_DUE,
            )
            count = int(rows[0][0])
            if count:
                break
            await asyncio.sleep(0.2)
        return count

    async def owner_kill(self) -> bool:
        timers = await self.wait_for_due_timers(15)
        owners = await asyncio.to_thread(self.owners_by_shards)
        name = owners[0][0] if owners else self.rng.choice(OWNERS)
        pid = self.stack.pid(name)
        killed_at = await asyncio.to_thread(self.db_now)
        os.kill(pid, signal.SIGKILL)
        self.note("owner_kill", "killed", owner=name, pid=pid, timers_due=timers)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(self.stack.restart, name)
        return await self.shards_owned(killed_at, LEASE_SECONDS * 4 + 10)

    async def owner_pause(self) -> bool:
        owners = await asyncio.to_thread(self.owners_by_shards)
        if not owners:
            return False
        name = owners[0][0]
        held = await asyncio.to_thread(
            sql, self.stack.db_url, "SELECT shard_id, range_id FROM history_shard WHERE owner = %s", (name,)
        )
        pid = self.stack.pid(name)
        os.kill(pid, signal.SIGSTOP)
        self.note("owner_pause", "stopped", owner=name, pid=pid, shards=len(held))
        taken = False
        try:
            deadline = time.monotonic() + LEASE_SECONDS * 4 + 5
            while time.monotonic() < deadline and not taken:
                await asyncio.sleep(0.5)
                rows = await asyncio.to_thread(
                    sql,
                    self.stack.db_url,
                    TAKEN_OVER,
                    ([s for s, _ in held], name),
                )
                taken = int(rows[0][0]) == len(held)
        finally:
            os.kill(pid, signal.SIGCONT)
        self.note("owner_pause", "resumed", owner=name, taken_over=taken)
        if not taken:  # say why: is the other owner alive and heartbeating?
            beats = await asyncio.to_thread(sql, self.stack.db_url, HEARTBEAT_AGES)
            alive = {n: self.stack.group.processes[self.stack.process_name(n)].poll() is None for n in OWNERS}
            self.stats["owner_pause"].notes.append(f"not taken over; heartbeat ages {beats}, running {alive}")
        return taken and await self.shards_owned(await asyncio.to_thread(self.db_now), LEASE_SECONDS * 4 + 10)

    async def pg_drop(self) -> bool:
        rows = await asyncio.to_thread(
            sql,
            self.stack.db_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        self.note("pg_drop", "terminated", backends=len(rows))
        return await self.api_answers(30)

    async def pg_restart(self) -> bool:
        assert self.cluster is not None
        await asyncio.to_thread(self.cluster.crash_and_restart, 1.0)
        self.note("pg_restart", "restarted")
        return await self.api_answers(45)
