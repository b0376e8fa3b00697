"""When a time-skipping stack jumps its clock, and the holds that stop it.

Only a stack started with ``CHRONICLE_TIME_SKIPPING`` (see :mod:`chronicle.clock`) calls
this. Its shard owner asks :func:`skip_if_idle` on every turn of its loop: when no worker
has anything to do, the skipped clock jumps to the next moment something is due (a timer,
or a task made visible later), and the shard owner's next turn fires it as usual. A 30-day
``workflow.sleep`` in a test so costs a few round trips, not 30 days.

"Nothing to do" means: no task row a poller could take now (workflow, activity or query
task), no workflow task started and not yet answered, no activity started and not yet
closed, no timer already due. A worker that is slow to poll a visible task, or a long
activity, holds the clock: it never jumps under a worker's feet, as in Temporal's test
server, which locks skipping while a task is in flight.

One difference from Temporal: Temporal's test server skips only while a client waits on a
workflow's result (or ``env.sleep`` asks), and Chronicle's skips whenever the stack is
idle. A test that starts a workflow and looks at it before its timers fire should hold the
clock with ``env.auto_time_skipping_disabled()``, which counts in :func:`hold`; ``env.sleep``
moves the clock whatever the holds (:func:`chronicle.clock.skip_by`).

Retention timers are never a target: a closed run's retention is days away, and jumping to
it would delete the run a test is about to read. They still fire once the clock passes them
for another reason.
"""

from __future__ import annotations

import time
from datetime import datetime

from django.db.models import F, Min
from django.db.models.functions import Greatest

from chronicle import clock
from history.models import (
    ActivityState,
    ExecutionStatus,
    PendingActivity,
    Task,
    TimerKind,
    TimerTask,
    WorkflowExecution,
)
from history.skipped_clock import SkippedClock

# How long ``env.sleep`` waits for the timers it made due to fire, and how often it looks.
SETTLE_SECONDS = 5.0
SETTLE_POLL_SECONDS = 0.02


def busy(now: datetime) -> bool:
    """Whether a worker has something to do, or a timer is already due, at ``now``."""
    return (
        Task.objects.filter(visible_at__lte=now).exists()
        or TimerTask.objects.filter(fire_at__lte=now).exists()
        or WorkflowExecution.objects.filter(status=ExecutionStatus.RUNNING)
        .exclude(wft_started_event_id=0)
        .exists()
        or PendingActivity.objects.filter(state=ActivityState.STARTED).exists()
    )


def next_due() -> datetime | None:
    """The earliest moment anything is due: a timer (not a retention) or a delayed task."""
    timer = TimerTask.objects.exclude(kind=TimerKind.RETENTION).aggregate(at=Min("fire_at"))["at"]
    task = Task.objects.aggregate(at=Min("visible_at"))["at"]
    return min((at for at in (timer, task) if at is not None), default=None)


def held() -> bool:
    """Whether a test environment holds the clock (``auto_time_skipping_disabled``)."""
    return SkippedClock.objects.filter(id=1, skipping_locks__gt=0).exists()


def skip_if_idle() -> bool:
    """Jump the skipped clock to the next due moment if the stack is idle and not held.

    Returns whether it jumped. Two shard owners deciding at once are harmless: the offset
    only grows (:func:`chronicle.clock.skip_to`), and a timer fires once whoever fires it.
    """
    now = clock.now()
    if held() or busy(now):
        return False
    target = next_due()
    if target is None or target <= now:
        return False
    clock.skip_to(target)
    return True


def wait_until_fired(timeout: float = SETTLE_SECONDS) -> bool:
    """Wait until no timer is due at the clock's reading (the shard owner fired them), at
    most ``timeout`` seconds; return whether none is left. ``env.sleep`` returns after it,
    so a test sees the timers its sleep passed as fired."""
    deadline = time.monotonic() + timeout
    while TimerTask.objects.filter(fire_at__lte=clock.now()).exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(SETTLE_POLL_SECONDS)
    return True


def hold() -> int:
    """Stop automatic skipping until :func:`release`; holds nest. Returns the open holds."""
    row, _ = SkippedClock.objects.get_or_create(id=1)
    SkippedClock.objects.filter(id=row.id).update(skipping_locks=F("skipping_locks") + 1)
    return held_count()


def release() -> int:
    """Undo one :func:`hold` (never below zero). Returns the holds left open."""
    SkippedClock.objects.filter(id=1).update(skipping_locks=Greatest(F("skipping_locks") - 1, 0))
    return held_count()


def held_count() -> int:
    """The open holds."""
    return SkippedClock.objects.filter(id=1).values_list("skipping_locks", flat=True).first() or 0
