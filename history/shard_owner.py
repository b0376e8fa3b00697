"""The shard-owner daemon: leases shards and fires their due timers (DESIGN §5).

A loop of small steps, each returning whether it did work: ``heartbeat`` registers
this process, ``rebalance`` claims free or expired shards up to a fair share and
releases the excess, ``renew_leases`` extends owned leases, ``fire_due_timers``
fires due rows. It sleeps until the earliest known ``fire_at`` of its shards, and a
NOTIFY on ``chronicle_timers_v1`` wakes it for an earlier one. Each firing
transaction re-checks the shard's ``range_id`` under ``FOR SHARE``, so a paused,
stale owner cannot act after a takeover.
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
from django.utils import timezone

from chronicle import clock, health, metrics
from chronicle.conf import engine_settings
from chronicle.db import DatabaseOutage
from history import time_skipping
from history.kernel import ShardFence, ShardFenceLost, fire_timers
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
        now = timezone.now()
        ShardOwnerProcess.objects.update_or_create(
            owner=self.owner,
            defaults={"heartbeat_at": now},
            create_defaults={"heartbeat_at": now, "started_at": now},
        )

    def fair_share(self) -> int:
        live = ShardOwnerProcess.objects.filter(heartbeat_at__gte=timezone.now() - self.lease).count()
        return math.ceil(self.settings.shards / max(1, live))

    def renew_leases(self) -> bool:
        """Extend owned leases; forget any shard whose range_id moved (taken over)."""
        if not self.owned:
            return False
        expires = timezone.now() + self.lease
        with transaction.atomic():
            rows = Shard.objects.select_for_update().filter(shard_id__in=list(self.owned))
            for shard in rows:
                if shard.range_id != self.owned[shard.shard_id] or shard.owner != self.owner:
                    log.warning("lost shard %d to %s", shard.shard_id, shard.owner)
                    metrics.shard_ownership_change("lost")
                    self.owned.pop(shard.shard_id, None)
                    continue
                shard.lease_expires_at = expires
                shard.save(update_fields=["lease_expires_at"])
                metrics.lease_renewals(1)
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
        now = timezone.now()
        with transaction.atomic():
            free = list(
                Shard.objects.select_for_update(skip_locked=True).filter(lease_expires_at__isnull=True)
                | Shard.objects.select_for_update(skip_locked=True).filter(lease_expires_at__lt=now)
            )[:want]
            for shard in free:
                shard.owner = self.owner
                shard.range_id += 1
                shard.lease_expires_at = now + self.lease
                shard.save()
                self.owned[shard.shard_id] = shard.range_id
                self.next_fire[shard.shard_id] = None
                log.info("acquired shard %d (range_id %d)", shard.shard_id, shard.range_id)
                metrics.shard_ownership_change("acquired")
                changed = True
        if changed:
            self.refresh_next_fire()
        return changed

    # -- timers -------------------------------------------------------------------
    def refresh_next_fire(self) -> None:
        if not self.owned:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT s, (SELECT min(fire_at) FROM history_timertask WHERE shard_id = s) "
                "FROM unnest(%s::int[]) AS s",
                [list(self.owned)],
            )
            self.next_fire = dict(cursor.fetchall())

    def fire_due_timers(self) -> bool:
        """Fire every due row of owned shards; return whether anything fired.

        Due rows are claimed across all owned shards at once, oldest first, and each
        batch fires in one transaction fenced on every shard it touches: 1,000 timers
        due in one second spread over 16 shards cost a few transactions, not 16+.
        """
        now = clock.now()
        due_shards = {
            s for s, at in self.next_fire.items() if at is not None and at <= now and s in self.owned
        }
        metrics.timer_lateness(now, [self.next_fire[s] for s in due_shards])
        did = False
        while due_shards:
            due = list(
                TimerTask.objects.filter(shard_id__in=due_shards, fire_at__lte=clock.now())
                .order_by("fire_at")
                .values_list("id", "run_id", "shard_id", "kind")[:FIRE_BATCH]
            )
            if not due:
                break
            fence_of = {s: ShardFence(s, self.owned[s]) for s in sorted({shard for _, _, shard, _ in due})}
            rows = [(tid, str(run)) for tid, run, _, kind in due if kind not in TRANSFER_KINDS]
            try:
                for tid, _, shard, kind in due:
                    if kind in TRANSFER_KINDS:
                        self.carry_transfers(fence_of[shard], [tid])
                if rows:
                    self.fired_total += fire_timers(list(fence_of.values()), rows)
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
                ).update(fire_at=clock.now() + timedelta(seconds=5))
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
                    fire_at=clock.now() + timedelta(seconds=1)
                )

    def note_timer(self, payload: str) -> None:
        shard_text, _, stamp = payload.partition("|")
        try:
            shard_id, fire_at = int(shard_text), datetime.fromtimestamp(float(stamp), tz=UTC)
        except ValueError:
            return
        if shard_id in self.owned:
            current = self.next_fire.get(shard_id)
            if current is None or fire_at < current:
                self.next_fire[shard_id] = fire_at

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
        now = clock.now()
        times = [at for at in self.next_fire.values() if at is not None]
        until_timer = min(((t - now).total_seconds() for t in times), default=1.0)
        housekeeping_in = self._last_housekeeping + self.settings.shard_lease_seconds / 3 - time.monotonic()
        return max(0.0, min(until_timer, housekeeping_in, 1.0))

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
                if time.monotonic() - self._last_housekeeping >= self.settings.shard_lease_seconds / 3:
                    self.housekeeping()
                    self._last_housekeeping = time.monotonic()
                self.fire_due_timers()
                if clock.time_skipping():  # a test stack: jump to the next timer when idle
                    time_skipping.skip_if_idle()
                outage.recovered()
                health.beat("shard-owner")
                timeout = self.sleep_seconds()
                if timeout > 0:
                    for note in listen.notifies(timeout=timeout, stop_after=1):
                        self.note_timer(note.payload)
                    for note in listen.notifies(timeout=0.0):
                        self.note_timer(note.payload)

    def shutdown(self) -> None:
        """Release leases so another owner picks them up at once."""
        Shard.objects.filter(owner=self.owner).update(owner="", lease_expires_at=None)
        ShardOwnerProcess.objects.filter(owner=self.owner).delete()
        log.info("shard owner %s stopped after firing %d timers", self.owner, self.fired_total)

    def _stop(self, signum: int, frame: Any) -> None:
        self.stopping = True
