"""The shard owner decides time by the database's clock, not its own, on the real PostgreSQL.

Each test moves this process's clock (``django.utils.timezone.now`` and ``chronicle.clock.now``,
which every call site reads at each call) an hour ahead or behind, as a clock stepped by
hand or by a broken time sync would, after the setup wrote its rows by the real clock. The
owner must then still see a live lease as live and an expired one as expired, fire a timer
neither before nor long after its ``fire_at``, and stamp the firing with the database's time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.db.models.functions import Now
from django.utils import timezone

from chronicle import clock
from history import kernel
from history.kernel.locks import lock_runs, locked_at
from history.models import HistoryEvent, Shard, ShardOwnerProcess, TimerKind, TimerTask, WorkflowExecution
from history.shard_owner import ShardOwner
from matching.dispatch import poll_once
from tests.factories import ExecutionFactory, scope_of

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
Skew = Callable[[timedelta], None]


@pytest.fixture
def skew(monkeypatch: pytest.MonkeyPatch) -> Skew:
    """Move this process's clock by a given amount from then on (the database's stays)."""
    real = timezone.now

    def move(by: timedelta) -> None:
        def skewed() -> datetime:
            return real() + by

        monkeypatch.setattr(timezone, "now", skewed)
        monkeypatch.setattr(clock, "now", skewed)

    return move


def db_time() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        row = cursor.fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def _sleeping_run(seconds: float) -> tuple[WorkflowExecution, TimerTask]:
    """A run whose workflow started a user timer of ``seconds``, by the real clock."""
    run: WorkflowExecution = ExecutionFactory()
    task = poll_once(run.namespace, run.task_queue, "workflow", "w1")
    assert task is not None
    command = {
        "command_type": "StartTimer",
        "attributes": {"timer_id": "nap", "start_to_fire_timeout": seconds},
    }
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[command]
    )
    return run, TimerTask.objects.get(run_id=run.run_id, kind=TimerKind.USER_TIMER)


def _owning(name: str, shard_id: int) -> ShardOwner:
    """An owner holding ``shard_id`` under a live lease, with its next timers read."""
    Shard.objects.update_or_create(shard_id=shard_id, defaults={"range_id": 7})
    Shard.objects.filter(shard_id=shard_id).update(owner=name, lease_expires_at=Now() + HOUR)
    owner = ShardOwner(name)
    owner.owned = {shard_id: 7}
    owner.refresh_next_fire()
    owner._last_housekeeping = time.monotonic()  # as after the loop's housekeeping
    return owner


def _fired(run: WorkflowExecution) -> HistoryEvent | None:
    return HistoryEvent.objects.filter(run_id=run.run_id, event_type="TimerFired").first()


def _leases(owner: str, expires_in: timedelta) -> None:
    """Every shard held by ``owner`` (a live process) under a lease ending in ``expires_in``
    by the database's clock."""
    ShardOwner(owner).ensure_shards()
    ShardOwnerProcess.objects.all().delete()
    ShardOwnerProcess.objects.create(owner=owner, heartbeat_at=Now(), started_at=Now())
    Shard.objects.update(owner=owner, range_id=3, lease_expires_at=Now() + expires_in)


def test_an_owner_ahead_in_time_takes_no_live_lease(skew: Skew) -> None:
    _leases("live", timedelta(seconds=30))
    ahead = ShardOwner("ahead")
    skew(HOUR)

    ahead.heartbeat()
    changed = ahead.rebalance()

    assert not changed and ahead.owned == {}
    assert set(Shard.objects.values_list("owner", "range_id")) == {("live", 3)}


def test_an_owner_behind_in_time_takes_an_expired_lease(skew: Skew) -> None:
    _leases("gone", timedelta(seconds=-1))
    ShardOwnerProcess.objects.filter(owner="gone").update(heartbeat_at=Now() - HOUR)
    behind = ShardOwner("behind")
    skew(-HOUR)

    behind.heartbeat()
    assert behind.fair_share() == behind.settings.shards, "a process silent for an hour is not live"
    assert behind.rebalance()

    assert len(behind.owned) == behind.settings.shards
    assert set(Shard.objects.values_list("owner", "range_id")) == {("behind", 4)}


def test_heartbeats_and_leases_are_stamped_by_the_database(skew: Skew) -> None:
    _leases("gone", timedelta(seconds=-1))
    owner = ShardOwner("stamped")
    skew(HOUR)
    before = db_time()

    owner.heartbeat()
    owner.heartbeat()
    owner.rebalance()
    skew(-HOUR)
    owner.renew_leases()
    after = db_time()

    process = ShardOwnerProcess.objects.get(owner="stamped")
    assert before <= process.started_at <= process.heartbeat_at <= after
    for expires in Shard.objects.filter(owner="stamped").values_list("lease_expires_at", flat=True):
        assert expires is not None and before + owner.lease <= expires <= after + owner.lease


def test_an_owner_ahead_in_time_fires_no_timer_early(skew: Skew) -> None:
    run, timer = _sleeping_run(600)
    owner = _owning("ahead", run.shard_id)
    skew(HOUR)

    assert not owner.fire_due_timers()
    assert owner.fire_due_timers() is False, "the pass read the database's time again: still not due"

    assert _fired(run) is None
    assert TimerTask.objects.filter(id=timer.id).exists()
    assert abs(owner.database_now() - db_time()) < timedelta(seconds=5)
    assert owner.sleep_seconds() > 0, "a timer ten minutes away by the database's clock: it waits"


def test_an_owner_behind_in_time_fires_a_due_timer_stamped_by_the_database(skew: Skew) -> None:
    run, timer = _sleeping_run(600)
    TimerTask.objects.filter(id=timer.id).update(fire_at=Now() - timedelta(seconds=1))
    owner = _owning("behind", run.shard_id)
    skew(-HOUR)
    assert owner.sleep_seconds() == 0, "due by the database's clock: no wait"
    before = db_time()

    assert owner.fire_due_timers()
    after = db_time()

    fired = _fired(run)
    assert fired is not None
    assert before <= fired.event_time <= after, "the firing's stamp is the database's time"
    events = HistoryEvent.objects.filter(run_id=run.run_id).order_by("event_id")
    stamps = list(events.values_list("event_time", flat=True))
    assert stamps == sorted(stamps)
    assert not TimerTask.objects.filter(id=timer.id).exists()


def test_time_skipping_selects_and_stamps_by_the_database_plus_the_skipped_offset(
    skew: Skew, monkeypatch: Any
) -> None:
    run, _ = _sleeping_run(600)
    owner = _owning("skipping", run.shard_id)
    clock.skip_by(timedelta(days=1))
    skew(-HOUR)  # the process's real clock; the skipped clock is the database's plus the offset
    monkeypatch.setattr(clock, "now", clock.skipped_now)
    assert clock.time_skipping()
    before = db_time() + clock.offset()

    assert owner.fire_due_timers()

    fired = _fired(run)
    assert fired is not None
    assert before <= fired.event_time <= db_time() + clock.offset()


@pytest.mark.django_db(transaction=True)
def test_a_lock_that_waited_for_a_writer_reads_the_time_after_its_commit() -> None:
    """The property the firing's stamp rests on: the run lock's ``locked_at`` is read once
    a writer that held the run committed, so it follows every stamp that writer made."""
    run: WorkflowExecution = ExecutionFactory()
    db = connection.settings_dict
    seen: dict[str, datetime | None] = {}

    def lock() -> None:
        try:
            with transaction.atomic():
                seen["at"] = locked_at(lock_runs({run.run_id}, {run.shard_id})[run.run_id])
        finally:
            connection.close()

    table = WorkflowExecution._meta.db_table
    with psycopg.connect(
        dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"] or None
    ) as writer:
        writer.execute(f"SELECT 1 FROM {table} WHERE run_id = %s FOR UPDATE", [run.run_id])
        waiting = threading.Thread(target=lock)
        waiting.start()
        time.sleep(0.5)
        assert "at" not in seen, "the lock waits for the writer"
        writer.execute(f"UPDATE {table} SET next_event_id = next_event_id WHERE run_id = %s", [run.run_id])
        row = writer.execute("SELECT clock_timestamp()").fetchone()
        assert row is not None
        writer.commit()
    waiting.join(timeout=10)

    at = seen["at"]
    assert at is not None and at > row[0]
