"""The cross-host nemesis: each fault injected on the running cluster, waited out, repaired.

Every fault returns a :class:`~bench.faults.cluster.report.Round`: when it began, when
the service (or what the fault took) came back, when the cluster was whole again, and
its own figures. A fault *survives* when it came back within its bound and the cluster
was repaired; the data is judged by the checker after the drain.

* ``pg_kill``: every process of the primary's host SIGKILLed; the monitor promotes the
  standby; the old primary is started again and must rejoin as the synchronous standby.
* ``pg_cut``: the primary's host partitioned from everything (``cluster.sh cut``); it
  stops itself, the standby is promoted; healed, the old primary rejoins.
* ``owner_cut``: the shard owner holding the most shards partitioned from both data
  nodes, while timers are due; every one of its shards must be taken by the other owner
  (range_id bumped) soon after its lease ran out; healed, the cut owner must find its
  writes fenced off (it logs each shard it lost) and get its share back.
* ``frontend_kill``: the frontend holding the most client connections killed with them
  in flight; HAProxy sends the retries to the other; the host is started again.
* ``worker_kill``: the worker host killed while an activity runs on it; the activity
  must run again (after its heartbeat timeout) and complete; the host is started again.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..load import Load
from . import control
from .control import LEASE_SECONDS, OWNERS, STATE, WORKER_HOST, Probe, Workers, script
from .report import BETWEEN, Round

KINDS = ("pg_kill", "pg_cut", "owner_cut", "frontend_kill", "worker_kill")
FAILOVER_WITHIN = 120.0
REJOIN_WITHIN = 240.0
# A cut owner's shards are taken once their leases run out (up to one lease after the cut)
# and the other owner's housekeeping (a third of a lease) sees it: within two leases.
TAKEOVER_WITHIN = 2 * LEASE_SECONDS
FENCE_LINES = re.compile(r"lost shard \d+ to|fenced off")


async def off(fn: Callable[..., object], *args: object) -> object:
    return await asyncio.to_thread(fn, *args)


class ClusterNemesis:
    def __init__(self, rng: random.Random, load: Load, probe: Probe, workers: Workers, run_dir: Path) -> None:
        self.rng = rng
        self.load = load
        self.probe = probe
        self.workers = workers
        self.log = (run_dir / "nemesis.jsonl").open("a", encoding="utf-8")
        self.rounds: list[Round] = []

    def note(self, kind: str, phase: str, **fields: object) -> None:
        self.log.write(json.dumps({"t": time.time(), "fault": kind, "phase": phase, **fields}) + "\n")
        self.log.flush()

    async def run(self, kinds: list[str], rounds: int, stop: asyncio.Event) -> None:
        """``rounds`` times each kind, in a seeded order, with a few quiet seconds between."""
        actions: dict[str, Callable[[Round], Awaitable[None]]] = {
            "pg_kill": self.pg_kill,
            "pg_cut": self.pg_cut,
            "owner_cut": self.owner_cut,
            "frontend_kill": self.frontend_kill,
            "worker_kill": self.worker_kill,
        }
        for index in range(rounds):
            order = list(kinds)
            self.rng.shuffle(order)
            for kind in order:
                await asyncio.sleep(self.rng.uniform(3.0, 6.0))
                one = Round(kind, index + 1)
                self.load.phase = kind
                self.note(kind, "start", round=one.index)
                control.log(f"round {one.index}: {kind}")
                try:
                    await actions[kind](one)
                except Exception as exc:  # a fault's own failure is a finding, not the end of the run
                    one.survived = False
                    one.notes.append(f"failed: {exc!r}"[:300])
                one.restored = one.restored or time.time()
                healthy = await self.healthy(within=REJOIN_WITHIN)
                if not healthy:
                    one.survived = False
                    one.notes.append("the cluster was not whole again within the bound")
                self.load.phase = BETWEEN
                self.rounds.append(one)
                self.note(kind, "stop", round=one.index, survived=one.survived, figures=one.figures)
                verdict = "ok" if one.survived else "NOT RECOVERED"
                control.log(f"  {kind}: {verdict} {one.figures} {one.notes}")
        stop.set()

    # -- the whole cluster ----------------------------------------------------------
    async def healthy(self, within: float) -> bool:
        """Both data nodes in step (primary and secondary), both frontends ready and through
        HAProxy, every host's processes running, every shard leased."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if await asyncio.to_thread(self.whole):
                return True
            await asyncio.sleep(1.0)
        return False

    def whole(self) -> bool:
        try:
            states = sorted(control.node_states().values())
            if states != ["primary", "secondary"]:
                return False
            if not all(control.ready(url) for url in control.FRONTENDS.values()):
                return False
            if not all(control.host_alive(h) for h in ("lb", *OWNERS, WORKER_HOST)):
                return False
            if not self.workers.alive():
                return False
            now = control.db_now()
            return all(owner in OWNERS and expiry > now for owner, _, expiry in control.shards().values())
        except Exception:  # a database or monitor not answering yet
            return False

    async def promoted_other_than(self, old: str, within: float) -> tuple[str, float]:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                now = await asyncio.to_thread(control.primary)
            except Exception:
                now = ""
            if now and now != old:
                return now, time.time()
            await asyncio.sleep(0.25)
        raise TimeoutError(f"no new primary {within:.0f} s after {old} was lost")

    async def served_after(self, one: Round, moment: float, within: float = 60.0) -> bool:
        served = await self.probe.wait_ok_after(moment, within)
        if served is None:
            one.notes.append(f"no probe answered within {within:.0f} s")
            return False
        one.recovered = served
        return True

    # -- the faults -------------------------------------------------------------------
    async def pg_kill(self, one: Round) -> None:
        old = str(await off(control.primary))
        one.began = time.time()
        await off(script, "kill", old)
        self.note("pg_kill", "killed", node=old)
        _, promoted = await self.promoted_other_than(old, FAILOVER_WITHIN)
        one.figures["failover s"] = promoted - one.began
        served = await self.served_after(one, promoted)
        if served:
            one.figures["served after promotion s"] = max(0.0, one.recovered - promoted)
        await off(script, "restart", old)
        one.survived = served and await self.rejoined(one, old)

    async def pg_cut(self, one: Round) -> None:
        old = str(await off(control.primary))
        one.began = time.time()
        await off(script, "cut", old)
        self.note("pg_cut", "cut", node=old)
        try:
            _, promoted = await self.promoted_other_than(old, FAILOVER_WITHIN)
            one.figures["failover s"] = promoted - one.began
            served = await self.served_after(one, promoted)
            if served:
                one.figures["served after promotion s"] = max(0.0, one.recovered - promoted)
        finally:
            await off(script, "heal")
        self.note("pg_cut", "healed", node=old)
        one.survived = served and await self.rejoined(one, old)

    async def rejoined(self, one: Round, node: str) -> bool:
        began = time.monotonic()
        deadline = began + REJOIN_WITHIN
        while time.monotonic() < deadline:
            try:
                if (await asyncio.to_thread(control.node_states)).get(node) == "secondary":
                    one.figures["rejoined after s"] = time.monotonic() - began
                    one.restored = time.time()
                    return True
            except Exception:
                pass
            await asyncio.sleep(1.0)
        one.notes.append(f"{node} did not rejoin as secondary within {REJOIN_WITHIN:.0f} s")
        return False

    async def owner_cut(self, one: Round) -> None:
        await self.timers_due(within=15)
        leases = await asyncio.to_thread(control.shards)
        held_by = {o: [s for s, (owner, _, _) in leases.items() if owner == o] for o in OWNERS}
        victim = max(OWNERS, key=lambda o: len(held_by[o]))
        other = next(o for o in OWNERS if o != victim)
        held = {s: leases[s] for s in held_by[victim]}
        expires = max((expiry for _, _, expiry in held.values()), default=0.0)
        log_path = STATE / "logs" / f"{victim}.log"
        log_offset = log_path.stat().st_size if log_path.exists() else 0
        cut_db_time = await asyncio.to_thread(control.db_now)
        one.began = time.time()
        await off(script, "cut", victim, *control.DATA_NODES)
        self.note("owner_cut", "cut", owner=victim, shards=len(held))
        try:
            taken = await self.taken_over(held, other, within=TAKEOVER_WITHIN + 10)
            if taken is None:
                one.notes.append(f"{victim}'s {len(held)} shards not all taken by {other}")
                return
            one.recovered = taken
            one.figures["takeover s"] = taken - one.began
            # How long after the last lease ran out (the database's clock, moved to ours).
            one.figures["after lease expiry s"] = max(0.0, (taken - one.began) - (expires - cut_db_time))
            await asyncio.sleep(2.0)
        finally:
            await off(script, "heal")
        healed = time.time()
        self.note("owner_cut", "healed", owner=victim)
        refused = await self.fence_lines(log_path, log_offset, within=45)
        one.figures["late writes fenced off"] = refused
        if not refused:
            one.notes.append(f"{victim} logged no shard lost to the fence after the heal")
        back = await self.owner_holds(victim, within=60)
        one.figures["share back after heal s"] = time.time() - healed
        one.restored = time.time()
        within_lease = one.figures["takeover s"] <= TAKEOVER_WITHIN
        if not within_lease:
            took = one.figures["takeover s"]
            one.notes.append(f"takeover took {took:.1f} s (bound {TAKEOVER_WITHIN:.0f} s)")
        one.survived = within_lease and bool(refused) and back

    async def timers_due(self, within: float) -> int:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            count = int(str(await off(control.timers_due_soon)))
            if count:
                return count
            await asyncio.sleep(0.2)
        return 0

    async def taken_over(
        self, held: dict[int, tuple[str, int, float]], other: str, within: float
    ) -> float | None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                now = await asyncio.to_thread(control.shards)
                if all(now[s][0] == other and now[s][1] > range_id for s, (_, range_id, _) in held.items()):
                    return time.time()
            except Exception:
                pass
            await asyncio.sleep(0.25)
        return None

    async def fence_lines(self, path: Path, offset: int, within: float) -> int:
        """Lines the healed owner logs for shards whose range_id moved under it."""
        deadline = time.monotonic() + within
        count = 0
        while time.monotonic() < deadline:
            with path.open("rb") as log:
                log.seek(offset)
                count = len(FENCE_LINES.findall(log.read().decode(errors="replace")))
            if count:
                await asyncio.sleep(1.0)  # the rest of its shards, in the same pass
                with path.open("rb") as log:
                    log.seek(offset)
                    return len(FENCE_LINES.findall(log.read().decode(errors="replace")))
            await asyncio.sleep(0.5)
        return count

    async def owner_holds(self, owner: str, within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                leases = await asyncio.to_thread(control.shards)
                if any(o == owner for o, _, _ in leases.values()):
                    return True
            except Exception:
                pass
            await asyncio.sleep(0.5)
        return False

    async def frontend_kill(self, one: Round) -> None:
        held = {host: int(str(await off(control.established, host))) for host in control.FRONTENDS}
        victim = max(held, key=lambda h: held[h])
        one.began = time.time()
        await off(script, "kill", victim)
        self.note("frontend_kill", "killed", host=victim, connections=held[victim])
        one.figures["connections cut"] = held[victim]
        served = await self.served_after(one, one.began)
        if served:
            one.figures["served after kill s"] = one.recovered - one.began
        await asyncio.sleep(1.0)
        await off(script, "restart", victim)
        back = await self.until(lambda: control.ready(control.FRONTENDS[victim]), within=90)
        one.restored = time.time()
        one.survived = served and back

    async def until(self, check: Callable[[], bool], within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if await asyncio.to_thread(check):
                return True
            await asyncio.sleep(0.5)
        return False

    def in_flight(self) -> dict[str, float]:
        """Activities begun and not ended by the harness's workers now: key -> begun at."""
        pids = self.workers.pids()
        begun: dict[str, float] = {}
        if not self.workers.effects.exists():
            return begun
        for line in self.workers.effects.read_text(encoding="utf-8").splitlines()[-500:]:
            entry = json.loads(line)
            if entry["pid"] not in pids:
                continue
            if entry["phase"] == "begin":
                begun[entry["key"]] = entry["t"]
            else:
                begun.pop(entry["key"], None)
        return begun

    def ended_after(self, keys: set[str], moment: float) -> dict[str, float]:
        """Of ``keys``, those run again after ``moment`` to their end: key -> the retry's begin."""
        again: dict[str, float] = {}
        ended: set[str] = set()
        for line in self.workers.effects.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry["key"] in keys and entry["t"] > moment:
                if entry["phase"] == "begin":
                    again.setdefault(entry["key"], entry["t"])
                else:
                    ended.add(entry["key"])
        return {k: t for k, t in again.items() if k in ended}

    async def worker_kill(self, one: Round) -> None:
        flying: dict[str, float] = {}
        deadline = time.monotonic() + 20
        while not flying and time.monotonic() < deadline:
            flying = await asyncio.to_thread(self.in_flight)
            if not flying:
                await asyncio.sleep(0.1)
        one.began = time.time()
        await off(script, "kill", WORKER_HOST)
        self.note("worker_kill", "killed", activities=sorted(flying))
        one.figures["activities cut"] = len(flying)
        await asyncio.to_thread(self.workers.reap)
        await asyncio.sleep(1.0)
        await off(script, "restart", WORKER_HOST)
        await asyncio.to_thread(self.workers.start)
        if not flying:
            one.notes.append("no activity in flight within 20 s")
            one.restored = time.time()
            return
        retried: dict[str, float] = {}
        deadline = time.monotonic() + 90
        while len(retried) < len(flying) and time.monotonic() < deadline:
            retried = await asyncio.to_thread(self.ended_after, set(flying), one.began)
            await asyncio.sleep(0.5)
        if retried:
            one.figures["activity run again after s"] = max(retried.values()) - one.began
            one.recovered = max(retried.values())
        one.restored = time.time()
        one.survived = len(retried) == len(flying)
        if not one.survived:
            one.notes.append(f"{len(flying) - len(retried)} activities not run again to their end")
