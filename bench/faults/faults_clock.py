"""A clock jump: one shard owner's clock (wall and monotonic, under libfaketime) jumps
forward, then back, while a run's timer is pending.

Only with ``--clock``: the stack then starts :data:`~bench.faults.stack.CLOCK_OWNER` with
libfaketime preloaded and its offset in a file the nemesis rewrites. A jump back is a jump
of the running process's monotonic clock too (libfaketime fakes both; faking only the wall
clock makes Python's ``time.sleep`` fail), so it is kept short.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from itertools import pairwise

from .faults_base import NemesisBase
from .stack import CLOCK_OWNER, LEASE_SECONDS, OWNERS

JUMP_SECONDS = 20  # how far the owner's clock jumps forward, then back
JUMP_HOLD = 4.0  # seconds it stays ahead
PROBE_TIMER = 8.0  # the probe run's timer: due after the hold, had the clock not moved
SHARD_OWNERS = "SELECT shard_id, owner FROM history_shard ORDER BY shard_id"


class ClockFaults(NemesisBase):
    async def watch_timer(self, wid: str, until: float) -> datetime | None:
        """Read ``wid``'s history until ``until`` (monotonic); when its TimerFired is first
        seen, by this process's (real) clock; None if not within the window."""
        while time.monotonic() < until:
            with contextlib.suppress(Exception):
                if any(e["event_type"] == "TimerFired" for e in await self.events(wid)):
                    return datetime.now(UTC)
            await asyncio.sleep(0.25)
        return None

    async def clock_jump(self) -> bool:
        """Jump the faked owner's clock :data:`JUMP_SECONDS` ahead for :data:`JUMP_HOLD`
        seconds, then back. Survived when every shard is held again under a renewed lease and
        the probe run completes; the figures say what the jump did meanwhile: shards taken
        from the live owner, how early the probe's timer fired, how far its history's event
        times went back (the checker counts that over every run)."""
        stats = self.stats["clock_jump"]
        stats.figure("faked owner start-ups retried", self.stack.clock_restarts)
        other = next(o for o in OWNERS if o != CLOCK_OWNER)
        probe = await self.load.start("FaultsChain", self.wid("clock"), [1, PROBE_TIMER])
        await asyncio.sleep(0.5)  # its timer is started
        before = dict(await self.db(SHARD_OWNERS))
        self.stack.set_clock(f"+{JUMP_SECONDS}s")
        self.note("clock_jump", "forward", seconds=JUMP_SECONDS)
        fired_at = await self.watch_timer(probe.workflow_id, time.monotonic() + JUMP_HOLD)
        during = dict(await self.db(SHARD_OWNERS))
        since = await asyncio.to_thread(self.db_now)
        self.stack.set_clock("+0s")
        self.note("clock_jump", "back", shards_before=before, shards_during=during)
        taken = [s for s, owner in during.items() if owner == CLOCK_OWNER and before.get(s) == other]
        stats.figure("shards taken from the live owner", len(taken))
        if taken:
            stats.notes.append("a shard owner ahead in time takes live owners' shards (leases use its clock)")
        ok = await self.shards_owned(since, JUMP_SECONDS + LEASE_SECONDS * 4 + 10)
        if not ok:
            stats.notes.append("shards not all held under a renewed lease after the jump back")
        began = time.monotonic()
        status = await self.closed([probe.workflow_id], JUMP_SECONDS + 30)
        stats.figure("probe done after the jump back s", time.monotonic() - began)
        if probe.outcome != "ok" or status[probe.workflow_id] != "COMPLETED":
            stats.notes.append(f"probe run {status[probe.workflow_id]} after the jump back")
            return False
        events = await self.events(probe.workflow_id)
        started = [
            datetime.fromisoformat(e["event_time"]) for e in events if e["event_type"] == "TimerStarted"
        ]
        if started and fired_at is not None:
            # TimerStarted is the frontend's stamp (a real clock); fired_at is when the
            # nemesis first saw TimerFired, by its own clock: the stamp may be the owner's.
            early = (started[0] - fired_at).total_seconds() + PROBE_TIMER
            stats.figure("probe timer early s", max(early, 0.0))
            if early > 0.5:
                stats.notes.append("a timer fires early when its owner's clock is ahead")
        times = [datetime.fromisoformat(e["event_time"]) for e in events]
        back = max([(a - b).total_seconds() for a, b in pairwise(times)] + [0.0])
        stats.figure("probe event time back s", back)
        if back > 0:
            stats.notes.append("event times go back in a history the owner ahead in time wrote to")
        return ok
