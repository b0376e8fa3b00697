"""The shard-owner daemon: leases shards and fires their due timers (DESIGN §5).

A loop of small steps, each returning whether it did work: ``heartbeat`` registers
this process, ``rebalance`` claims free or expired shards up to a fair share and
releases the excess, ``renew_leases`` extends owned leases, ``fire_due_timers``
fires due rows. It sleeps until the earliest known ``fire_at`` of its shards, and a
NOTIFY on ``chronicle_timers_v1`` wakes it for an earlier one. Each firing
transaction re-checks the shard's ``range_id`` under ``FOR SHARE``, so a paused,
stale owner cannot act after a takeover.

Time is the database's, never this process's clock: leases and heartbeats are written
and compared with PostgreSQL's ``now()`` in the statements themselves, due timers are
selected against the database's workflow now (:func:`chronicle.clock.database_now`), and
firings stamp their events with the time the run lock read. An owner whose clock jumps
can then neither take a live owner's shards, nor fire a timer early, nor stamp an event
out of order. Its own clock only measures how long to sleep, from the database time the
last pass read (:meth:`ShardOwner.database_now`).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from chronicle import clock, health, metrics
from chronicle.conf import engine_settings
from chronicle.db import DatabaseOutage
from history import time_skipping
from history.kernel import ShardFence, ShardFenceLost, due_timer_rows, fire_timers
from history.kernel.payloads import collect_unreferenced
from history.kernel.transfers import TRANSFER_KINDS, process_transfer
from history.kernel.wakeups import TIMERS_CHANNEL
from history.models import Shard, ShardOwnerProcess, TimerTask

log = logging.getLogger("chronicle.shard_owner")
FIRE_BATCH = 200
PAYLOAD_COLLECT_EVERY = 60.0  # seconds
PAYLOAD_COLLECT_BATCH = 500
PAYLOAD_COLLECT_BATCHES = 10


class ShardOwner:
    def __init__(self, owner: str | None = None) -> None:
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.settings = engine_settings()
        self.lease = timedelta(seconds=self.settings.shard_lease_seconds)
        self.owned: dict[int, int] = {}  # shard_id -> range_id
        self.next_fire: dict[int, datetime | None] = {}
        # The database's workflow now as last read, and this process's monotonic reading then.
        self._db_now: tuple[datetime, float] | None = None
        self.stopping = False
        self._last_housekeeping = 0.0
        self._last_payload_collection = 0.0
        self.fired_total = 0

    # -- registration and leases --------------------------------------------------
    def ensure_shards(self) -> None:
        existing = Shard.objects.count()
        if existing < self.settings.shards:
            Shard.objects.bulk_create(
                [Shard(shard_id=i) for i in range(self.settings.shards)], ignore_conflicts=True
            )

    def heartbeat(self) -> None:
        """Register this process as live, stamped by the database's clock (one statement
        after the first)."""
        if not ShardOwnerProcess.objects.filter(owner=self.owner).update(heartbeat_at=Now()):
            ShardOwnerProcess.objects.create(owner=self.owner, heartbeat_at=Now(), started_at=Now())

    def fair_share(self) -> int:
        live = ShardOwnerProcess.objects.filter(heartbeat_at__gte=Now() - self.lease).count()
        return math.ceil(self.settings.shards / max(1, live))

    def renew_leases(self) -> bool:
        """Extend owned leases to the database's now plus a lease; forget any shard whose
        range_id moved (taken over)."""
        if not self.owned:
            return False
        with transaction.atomic():
            rows = (
                Shard.objects.select_for_update()
                .filter(shard_id__in=list(self.owned))
                .values_list("shard_id", "range_id", "owner")
            )
            kept = []
            for shard_id, range_id, owner in rows:
                if range_id != self.owned[shard_id] or owner != self.owner:
                    log.warning("lost shard %d to %s", shard_id, owner)
                    metrics.shard_ownership_change("lost")
                    self.owned.pop(shard_id, None)
                    continue
                kept.append(shard_id)
            if kept:
                Shard.objects.filter(shard_id__in=kept).update(lease_expires_at=Now() + self.lease)
                metrics.lease_renewals(len(kept))
        return True

    def rebalance(self) -> bool:
        """Claim free/expired shards up to a fair share; release the excess."""
        target = self.fair_share()
        changed = False
        if len(self.owned) > target:
            for shard_id in sorted(self.owned)[target:]:
                Shard.objects.filter(
                    shard_id=shard_id, owner=self.owner, range_id=self.owned[shard_id]
                ).update(owner="", lease_expires_at=None)
                self.owned.pop(shard_id)
                self.next_fire.pop(shard_id, None)
                log.info("released shard %d", shard_id)
                metrics.shard_ownership_change("released")
                changed = True
        want = target - len(self.owned)
        if want <= 0:
            return changed
        with transaction.atomic():
            # Free, or its lease expired by the database's clock: a live lease is never taken.
            free = list(
                Shard.objects.select_for_update(skip_locked=True)
                .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=Now()))
                .order_by("shard_id")
                .values_list("shard_id", "range_id")[:want]
            )
            if free:
                Shard.objects.filter(shard_id__in=[shard_id for shard_id, _ in free]).update(
                    owner=self.owner, range_id=F("range_id") + 1, lease_expires_at=Now() + self.lease
                )
            for shard_id, range_id in free:
                self.owned[shard_id] = range_id + 1
                self.next_fire[shard_id] = None
                log.info("acquired shard %d (range_id %d)", shard_id, range_id + 1)
                metrics.shard_ownership_change("acquired")
                changed = True
        if changed:
            self.refresh_next_fire()
        return changed

    # -- timers -------------------------------------------------------------------
    def refresh_next_fire(self) -> None:
        """Read each owned shard's earliest ``fire_at`` and, in the same statement, the
        database's workflow now that :meth:`database_now` counts from."""
        if not self.owned:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT s, (SELECT min(fire_at) FROM history_timertask WHERE shard_id = s), "
                f"{clock.database_now_sql()} FROM unnest(%s::int[]) AS s",
                [list(self.owned)],
            )
            rows = cursor.fetchall()
        self.next_fire = {shard_id: at for shard_id, at, _ in rows}
        if rows:
            self._db_now = (rows[0][2], time.monotonic())

    def database_now(self) -> datetime:
        """The database's workflow now: the last reading plus the monotonic time since.

        What the owner's sleep and its "anything due?" test count from, never its wall
        clock. It reads the database again when it has no reading, when the skipped clock
        may have jumped meanwhile (a test stack), or when this process's monotonic clock
        went back. A clock that jumped forward makes it look early once: the due rows are
        still selected by the database's clock, and the pass reads the time again.
        """
        read = self._db_now
        elapsed = -1.0 if read is None else time.monotonic() - read[1]
        if read is None or elapsed < 0 or clock.time_skipping():
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {clock.database_now_sql()}")
                row = cursor.fetchone()
            assert row is not None
            self._db_now = read = (row[0], time.monotonic())
            elapsed = 0.0
        return read[0] + timedelta(seconds=elapsed)

    def fire_due_timers(self) -> bool:
        """Fire every due row of owned shards; return whether anything fired.

        Due rows are claimed across all owned shards at once, oldest first, and each
        batch fires in one transaction fenced on every shard it touches: 1,000 timers
        due in one second spread over 16 shards cost a few transactions, not 16+.
        """
        if not any(at is not None for at in self.next_fire.values()):
            return False
        now = self.database_now()
        due_shards = {
            s for s, at in self.next_fire.items() if at is not None and at <= now and s in self.owned
        }
        metrics.timer_lateness(now, [self.next_fire[s] for s in due_shards])
        did = False
        while due_shards:
            due = due_timer_rows(due_shards, FIRE_BATCH)
            if not due:
                break
            fence_of = {s: ShardFence(s, self.owned[s]) for s in sorted({shard for _, _, shard, _ in due})}
            rows = [(tid, str(run)) for tid, run, _, kind in due if kind not in TRANSFER_KINDS]
            try:
                for tid, _, shard, kind in due:
                    if kind in TRANSFER_KINDS:
                        self.carry_transfers(fence_of[shard], [tid])
                if rows:
                    self.fired_total += fire_timers(list(fence_of.values()), rows, database_time=True)
            except ShardFenceLost as lost:
                log.warning("shard %d fenced off: another owner took it", lost.shard_id)
                metrics.shard_ownership_change("lost")
                self.owned.pop(lost.shard_id, None)
                self.next_fire.pop(lost.shard_id, None)
                due_shards.discard(lost.shard_id)
                continue
            except Exception:
                log.exception("firing timers failed; backing off those rows")
                TimerTask.objects.filter(
                    shard_id__in=due_shards, id__in=[tid for tid, _, _, _ in due]
                ).update(fire_at=clock.database_now() + timedelta(seconds=5))
                break
            did = True
            if len(due) < FIRE_BATCH:
                break
        if due_shards:
            self.refresh_next_fire()
        return did

    def carry_transfers(self, fence: ShardFence, timer_ids: list[int]) -> None:
        """Carry transfer duties one by one; a failing one backs off alone."""
        for timer_id in timer_ids:
            try:
                self.fired_total += process_transfer(fence, timer_id)
            except ShardFenceLost:
                raise
            except Exception:
                log.exception("transfer duty %d failed; retrying it shortly", timer_id)
                TimerTask.objects.filter(id=timer_id, shard_id=fence.shard_id).update(
                    fire_at=clock.database_now() + timedelta(seconds=1)
                )

    def note_timer(self, payload: str) -> datetime | None:
        """Take a new timer's fire time into its shard's plan; the time, if it is now the
        shard's earliest known."""
        shard_text, _, stamp = payload.partition("|")
        try:
            shard_id, fire_at = int(shard_text), datetime.fromtimestamp(float(stamp), tz=UTC)
        except ValueError:
            return None
        if shard_id in self.owned:
            current = self.next_fire.get(shard_id)
            if current is None or fire_at < current:
                self.next_fire[shard_id] = fire_at
                return fire_at
        return None

    def wait_for_timers(self, listen: psycopg.Connection[Any], timeout: float) -> None:
        """Sleep up to ``timeout``, waking early only for a timer due before then (or a
        bare nudge: a test stack skipping time).

        Every workflow task started adds its timeout timer, seconds ahead, and notifies:
        waking for each of those re-planned for nothing, a storm of woken runs costing the
        owner a pass per task. A later timer is noted in its shard's plan and the sleep goes
        on; the plan is also re-read from the table at each housekeeping, so a missed
        notification costs at most that long.
        """
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            notes = [*listen.notifies(timeout=remaining, stop_after=1), *listen.notifies(timeout=0.0)]
            if any(not note.payload for note in notes):
                return
            noted = [at for at in (self.note_timer(note.payload) for note in notes) if at is not None]
            if noted and (min(noted) - self.database_now()).total_seconds() < deadline - time.monotonic():
                return

    # -- loop ---------------------------------------------------------------------
    def housekeeping(self) -> None:
        self.heartbeat()
        self.renew_leases()
        self.rebalance()
        self.collect_payloads()
        self.refresh_next_fire()

    def collect_payloads(self) -> None:
        """Delete stored payloads no run refers to any more, a few batches a minute.

        The store is shared by every shard, so only the owner of shard 0 collects.
        """
        if 0 not in self.owned or time.monotonic() - self._last_payload_collection < PAYLOAD_COLLECT_EVERY:
            return
        self._last_payload_collection = time.monotonic()
        for _ in range(PAYLOAD_COLLECT_BATCHES):
            with transaction.atomic():
                if collect_unreferenced(batch_size=PAYLOAD_COLLECT_BATCH) < PAYLOAD_COLLECT_BATCH:
                    return

    def sleep_seconds(self) -> float:
        """How long to wait: until the earliest known timer by the database's clock, the
        next housekeeping, or a second, whichever comes first."""
        times = [at for at in self.next_fire.values() if at is not None]
        until_timer = 1.0
        if times:
            until_timer = (min(times) - self.database_now()).total_seconds()
        housekeeping_in = self._last_housekeeping + self.settings.shard_lease_seconds / 3 - time.monotonic()
        return max(0.0, min(until_timer, housekeeping_in, 1.0))

    def housekeeping_due(self) -> bool:
        """Whether a third of a lease passed since the last housekeeping, by the monotonic
        clock; a monotonic clock that went back (a faked one) counts as due, not as a wait
        that long, or the leases would lapse meanwhile."""
        since = time.monotonic() - self._last_housekeeping
        return since < 0 or since >= self.settings.shard_lease_seconds / 3

    def run(self, listen_conninfo: str) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self.ensure_shards()
        log.info("shard owner %s starting (%d shards)", self.owner, self.settings.shards)
        outage = DatabaseOutage(f"shard owner {self.owner}")
        while not self.stopping:
            try:
                self.serve(listen_conninfo, outage)
            except (DatabaseError, psycopg.Error) as error:
                # Leases and timer rows are durable: after reconnecting, carry on from them.
                outage.lost(error)
        self.shutdown()

    def serve(self, listen_conninfo: str, outage: DatabaseOutage) -> None:
        """Fire timers and keep leases until told to stop, waking on timer notifications."""
        self._last_housekeeping = -math.inf  # notifications may have been missed: re-read at once
        with psycopg.connect(listen_conninfo, autocommit=True) as listen:
            listen.execute(f"LISTEN {TIMERS_CHANNEL}")
            while not self.stopping:
                if self.housekeeping_due():
                    self.housekeeping()
                    self._last_housekeeping = time.monotonic()
                self.fire_due_timers()
                if clock.time_skipping():  # a test stack: jump to the next timer when idle
                    time_skipping.skip_if_idle()
                outage.recovered()
                health.beat("shard-owner")
                self.wait_for_timers(listen, self.sleep_seconds())

    def shutdown(self) -> None:
        """Release leases so another owner picks them up at once."""
        Shard.objects.filter(owner=self.owner).update(owner="", lease_expires_at=None)
        ShardOwnerProcess.objects.filter(owner=self.owner).delete()
        log.info("shard owner %s stopped after firing %d timers", self.owner, self.fired_total)

    def _stop(self, signum: int, frame: Any) -> None:
        self.stopping = True
