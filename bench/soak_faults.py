"""The soak's faults, one at a time at intervals, and the memory of its processes.

The fault harness (``python -m bench.faults``) injects each fault many times against a
light load and checks every history; the soak injects a few of the same kinds, in turn,
into a heavy steady load, to show that it rides through them at its rate. Each fault
acts on a pid the soak's process group recorded (a gunicorn worker is a child of the
recorded master) and counts as recovered when the platform serves again within
:data:`RECOVERY_SECONDS` (a killed process is started again, as a supervisor would).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import psycopg

from chronicle.launcher import READY_PATH, ProcessGroup

FAULTS = ("frontend_worker_kill", "worker_kill", "owner_restart", "pg_drop")
RECOVERY_SECONDS = 30.0


def rss_mb(pid: int) -> float | None:
    """Resident memory of ``pid`` in MB (None once it has gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def memory_by_process(stack: ProcessGroup) -> dict[str, float]:
    """RSS (MB) of each process of the group, a gunicorn master's workers summed under
    ``frontend workers`` (they are replaced when one is killed, so one by one they would
    not make a series)."""
    out: dict[str, float] = {}
    for name, process in stack.processes.items():
        own = rss_mb(process.pid)
        if own is not None:
            out[name] = own
        workers = [m for m in map(rss_mb, children(process.pid)) if m is not None]
        if name == "frontend" and workers:
            out["frontend workers"] = sum(workers)
    return out


class Faults:
    """Injects :data:`FAULTS` in a seeded order, one every few seconds, and counts them."""

    def __init__(self, stack: ProcessGroup, url: str, dburl: str, rng: random.Random) -> None:
        self.stack = stack
        self.url = url
        self.dburl = dburl
        self.rng = rng
        self.stats: dict[str, dict[str, int]] = {name: {"injected": 0, "recovered": 0} for name in FAULTS}

    async def run(self, every: float, stop: asyncio.Event) -> None:
        if every <= 0:
            return
        order: list[str] = []
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), every)
                return
            except TimeoutError:
                pass
            if not order:
                order = list(FAULTS)
                self.rng.shuffle(order)
            await self.inject(order.pop())

    async def inject(self, name: str) -> None:
        actions: dict[str, Callable[[], Awaitable[None]]] = {
            "frontend_worker_kill": self.frontend_worker_kill,
            "worker_kill": lambda: self.kill_and_restart("worker"),
            "owner_restart": self.owner_restart,
            "pg_drop": self.pg_drop,
        }
        self.stats[name]["injected"] += 1
        began = time.monotonic()
        await actions[name]()
        if await self.serves(RECOVERY_SECONDS):
            self.stats[name]["recovered"] += 1
        print(f"[soak] fault {name}: served again after {time.monotonic() - began:.1f} s", flush=True)

    def owner_name(self) -> str:
        return next(name for name in self.stack.processes if name.startswith("shard_owner"))

    async def frontend_worker_kill(self) -> None:
        """SIGKILL one gunicorn worker mid-request; its master starts another."""
        workers = children(self.stack.processes["frontend"].pid)
        if workers:
            os.kill(self.rng.choice(workers), signal.SIGKILL)

    async def owner_restart(self) -> None:
        """Restart the shard owner as a deploy does (SIGTERM: it hands its leases back, so
        the new one takes its shards at once). A SIGKILLed owner's timers wait for its
        leases to run out; the fault harness covers that, with its own bound."""
        await self.kill_and_restart(self.owner_name(), signal.SIGTERM)

    async def kill_and_restart(self, name: str, how: signal.Signals = signal.SIGKILL) -> None:
        """Signal a process of the group and start it again once it has exited."""
        process = self.stack.processes[name]
        process.send_signal(how)
        await asyncio.to_thread(process.wait, 30)
        spec = next(s for s in reversed(self.stack.specs) if s.name == name)
        self.stack.specs.remove(spec)
        self.stack.add(spec)

    async def pg_drop(self) -> None:
        """End every server connection of the soak's database but this one's."""

        def terminate() -> None:
            with psycopg.connect(self.dburl, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )

        await asyncio.to_thread(terminate)

    async def serves(self, within: float) -> bool:
        """Whether the frontend says it is ready within ``within`` seconds."""
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(timeout=5) as http:
            while time.monotonic() < deadline:
                try:
                    if (await http.get(self.url + READY_PATH)).status_code == 200:
                        return True
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.5)
        return False
