"""Faults on the stack's processes: SIGKILL an SDK worker mid-activity, a gunicorn worker
mid-request, the shard owner with timers due; SIGSTOP the shard owner past its lease.

Each acts on a pid the stack recorded (a gunicorn worker is a child of the recorded
master), never on a process found by name; a paused process is always resumed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from .faults_base import NemesisBase, sql
from .stack import LEASE_SECONDS, OWNERS, WORKERS

TIMERS_DUE = "SELECT count(*) FROM history_timertask WHERE fire_at < now() + interval '2 s'"
HEARTBEAT_AGES = (
    "SELECT owner, round(extract(epoch FROM now() - heartbeat_at)::numeric, 1)::text"
    " FROM history_shardownerprocess ORDER BY owner"
)
# The paused owner's sessions holding locks on shard rows, with their state and statement:
# a claim skips a locked row (FOR UPDATE SKIP LOCKED), so such a lock delays a takeover.
SHARD_LOCKS = (
    "SELECT a.state, l.mode, left(a.query, 120), round(extract(epoch FROM now() - a.xact_start))::int"
    " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.relation = 'history_shard'::regclass AND a.application_name = %s"
)
TAKEN_OVER = "SELECT count(*) FROM history_shard WHERE shard_id = ANY(%s) AND owner NOT IN (%s, '')"


class ProcessFaults(NemesisBase):
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
        locks: list[tuple[Any, ...]] = []
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
            if not taken:  # still paused: what its sessions hold on the shard rows
                locks = await asyncio.to_thread(sql, self.stack.db_url, SHARD_LOCKS, (name,))
        finally:
            os.kill(pid, signal.SIGCONT)
        self.note("owner_pause", "resumed", owner=name, taken_over=taken)
        if not taken:  # say why: is the other owner alive and heartbeating?
            beats = await asyncio.to_thread(sql, self.stack.db_url, HEARTBEAT_AGES)
            alive = {n: self.stack.group.processes[self.stack.process_name(n)].poll() is None for n in OWNERS}
            self.stats["owner_pause"].notes.append(f"not taken over; heartbeat ages {beats}, running {alive}")
            self.note("owner_pause", "not taken over", heartbeats=beats, shard_locks_of_paused=locks)
            if locks:
                self.stats["owner_pause"].notes.append(
                    f"the paused owner's sessions lock shard rows: {locks}"
                )
        return taken and await self.shards_owned(await asyncio.to_thread(self.db_now), LEASE_SECONDS * 4 + 10)
