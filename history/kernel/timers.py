"""The timer queue's side of the kernel: fire due TimerTask rows under a shard fence.

Lock order is always run row first, then its timer row, the same order every kernel
operation uses, so firing never deadlocks with a completion. A fired row is deleted in
the transaction that appends its event, so a timer fires once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from chronicle import clock
from chronicle.errors import ChronicleError, ErrorCode
from history.faults import crash_point
from history.kernel import store
from history.kernel._mutation import ExecutionMutation, save_all
from history.kernel.activity_timeouts import redispatch_activity_txn, time_out_activity_txn
from history.kernel.archival import archive_run
from history.kernel.close import time_out_workflow_txn
from history.kernel.locks import lock_runs
from history.kernel.schedules import fire_schedule_timers_txn
from history.kernel.workflow_tasks import time_out_workflow_task_txn
from history.models import (
    ActivityState,
    ExecutionStatus,
    PendingActivity,
    TimerKind,
    TimerTask,
    WorkflowExecution,
)
from history.vocabulary import EventType

log = logging.getLogger("chronicle.timers")
_NO_RUN = ("", "None")
ARCHIVAL_RETRY = timedelta(seconds=10)

# Whether the worker of a run's sticky queue still polls it. Matching keeps the poller
# registry and installs its check (``MatchingConfig.ready``): history may not import it.
# Without a check, a sticky task times out after its schedule-to-start timeout, as in
# Temporal.
StickyPollerCheck = Callable[[WorkflowExecution], bool]


def _no_poller_known(execution: WorkflowExecution) -> bool:
    return False


_sticky_poller_alive: StickyPollerCheck = _no_poller_known


def set_sticky_poller_check(check: StickyPollerCheck) -> None:
    """Install matching's check of a sticky queue's poller (at app start-up)."""
    global _sticky_poller_alive
    _sticky_poller_alive = check


@dataclass(frozen=True)
class ShardFence:
    shard_id: int
    range_id: int


class ShardFenceLost(ChronicleError):
    def __init__(self, shard_id: int) -> None:
        super().__init__(ErrorCode.CONFLICT, f"shard {shard_id} was taken over")
        self.shard_id = shard_id


def check_fences(fences: Sequence[ShardFence]) -> None:
    """Take the shard rows FOR SHARE and check this owner's range_ids still hold.

    One statement for every shard of a firing batch; raises for the first shard lost.
    """
    with store.bound_cursor() as cursor:
        cursor.execute(
            "SELECT shard_id, range_id FROM history_shard "
            "WHERE shard_id = ANY(%s::int[]) ORDER BY shard_id FOR SHARE",
            [store.array_literal(f.shard_id for f in fences)],
        )
        current = dict(cursor.fetchall())
    for fence in fences:
        if current.get(fence.shard_id) != fence.range_id:
            raise ShardFenceLost(fence.shard_id)


def check_fence(fence: ShardFence) -> None:
    """One shard's fence (the transfer duties check theirs one shard at a time)."""
    check_fences([fence])


def fire_timers(
    fences: ShardFence | Sequence[ShardFence],
    timer_ids: list[tuple[int, str]],
    *,
    database_time: bool = False,
) -> int:
    """Fire the given (timer id, run id) rows in one transaction; return the fired count.

    The rows may span several shards (the owner claims due rows across all it owns);
    ``fences`` holds one fence per shard the rows belong to. Rows without a run are
    schedules' firings (``history.kernel.schedules``). ``database_time`` stamps the
    events with the database's time read by each run's lock, not this process's clock
    (the shard owner: its clock may be off, and the frontends stamp the run's other events).
    """
    fired = 0
    fence_list = [fences] if isinstance(fences, ShardFence) else list(fences)
    schedule_rows = [tid for tid, run_id in timer_ids if run_id in _NO_RUN]
    if schedule_rows:
        with transaction.atomic(durable=True):
            check_fences(fence_list)
            fired += fire_schedule_timers_txn(schedule_rows, [fence.shard_id for fence in fence_list])
        timer_ids = [(tid, run_id) for tid, run_id in timer_ids if run_id not in _NO_RUN]
        if not timer_ids:
            return fired
    with transaction.atomic(durable=True):
        check_fences(fence_list)
        # Lock the runs only, not their namespace rows, in run-id order (see ``lock_runs``).
        shards = sorted(fence.shard_id for fence in fence_list)
        locked = lock_runs({uuid.UUID(str(run_id)) for _, run_id in timer_ids}, shards)
        runs = {str(run_id): run for run_id, run in locked.items()}
        timers = _lock_timer_rows(shards, [tid for tid, _ in timer_ids])
        mutations: dict[str, ExecutionMutation] = {}
        done: list[int] = []
        for timer_id, run_id in timer_ids:
            timer = timers.get(timer_id)
            execution = runs.get(run_id)
            if timer is None or execution is None:
                continue
            mutation = mutations.get(run_id) or ExecutionMutation(
                execution, execution.namespace, database_time=database_time
            )
            mutations[run_id] = mutation
            if _fire_one(mutation, timer, done):
                fired += 1
        _delete_timer_rows(shards, done)
        save_all(list(mutations.values()))
        crash_point("daemon_after_fire_before_commit")
    return fired


_TIMER_ROWS = TimerTask._meta.db_table
# A batch's rows: fixed statements, as every pass of the shard owner runs both (the ORM
# spent longer building them than PostgreSQL spent running them).
_LOCK_TIMER_ROWS_SQL = (
    f"SELECT {store.select_list(TimerTask, 't')} FROM {_TIMER_ROWS} t"
    " WHERE t.shard_id = ANY(%s::int[]) AND t.id = ANY(%s::bigint[]) FOR UPDATE SKIP LOCKED"
)
_DELETE_TIMER_ROWS_SQL = (
    f"DELETE FROM {_TIMER_ROWS} WHERE shard_id = ANY(%s::int[]) AND id = ANY(%s::bigint[])"
)


def due_timer_rows(shards: Collection[int], limit: int) -> list[tuple[int, uuid.UUID | None, int, str]]:
    """Up to ``limit`` rows of ``shards`` due by the database's clock, oldest first, as
    (timer id, run id, shard, kind): what a firing pass claims next."""
    sql = (
        f"SELECT id, run_id, shard_id, kind FROM {_TIMER_ROWS}"
        f" WHERE shard_id = ANY(%s::int[]) AND fire_at <= {clock.database_now_sql()}"
        " ORDER BY fire_at LIMIT %s"
    )
    with store.bound_cursor() as cursor:
        cursor.execute(sql, [store.array_literal(sorted(shards)), limit])
        return [(int(tid), run_id, int(shard), str(kind)) for tid, run_id, shard, kind in cursor.fetchall()]


def _lock_timer_rows(shards: list[int], timer_ids: list[int]) -> dict[int, TimerTask]:
    """The rows still there of ``timer_ids``, locked, by id; a row another transaction holds
    is skipped (a concurrent firing of it: the first to lock it fires it)."""
    with store.bound_cursor() as cursor:
        cursor.execute(_LOCK_TIMER_ROWS_SQL, [store.array_literal(shards), store.array_literal(timer_ids)])
        rows = cursor.fetchall()
    return {timer.id: timer for timer in (store.load(TimerTask, row)[0] for row in rows)}


def _delete_timer_rows(shards: list[int], timer_ids: list[int]) -> None:
    if not timer_ids:
        return
    with store.bound_cursor() as cursor:
        cursor.execute(_DELETE_TIMER_ROWS_SQL, [store.array_literal(shards), store.array_literal(timer_ids)])


def _fire_one(m: ExecutionMutation, timer: TimerTask, done: list[int]) -> bool:
    """Apply one timer; return True if it changed the run.

    The row is either moved forward (a heartbeat arrived) or its id is put in ``done``
    for the caller to delete in one statement.
    """
    ex = m.execution
    kind = timer.kind
    if kind not in _HANDLERS and kind != TimerKind.RETENTION:
        return False  # a transfer duty: the shard owner carries those apart (``transfers``)
    if kind == TimerKind.RETENTION:
        if ex.status != ExecutionStatus.RUNNING:
            return _expire(m, timer)
        done.append(timer.id)
        return False
    if not ex.is_running:
        done.append(timer.id)
        return False
    if kind == TimerKind.ACTIVITY_TIMEOUT and timer.timeout_type == "HEARTBEAT":
        activity = _activity(ex, timer)
        if activity is not None and activity.last_heartbeat_time is not None:
            due = activity.last_heartbeat_time + timedelta(seconds=activity.heartbeat_timeout)
            if due > m.now:
                _move(timer, due)  # a heartbeat arrived: push the check forward
                return False
    if kind == TimerKind.STICKY_TIMEOUT and _sticky_worker_still_polls(m, timer):
        return False
    done.append(timer.id)
    return _HANDLERS[TimerKind(kind)](m, timer)


def _sticky_worker_still_polls(m: ExecutionMutation, timer: TimerTask) -> bool:
    """Leave a waiting sticky task with its worker while that worker polls its queue,
    checking again a timeout later; True if the timer was pushed forward.

    A worker that is alive but busy (a storm of timers due together) falls behind its
    sticky queue. Timing its tasks out there would make each one an extra write, and send
    it to a normal-queue poller that has the run in no cache and replays it from its first
    event. A worker that stops polling is caught by matching's fallback (a normal-queue poll
    takes a sticky task whose poller is gone) or by this timeout once the poller is gone.
    """
    ex = m.execution
    waiting = (
        ex.wft_scheduled_event_id == timer.scheduled_event_id
        and ex.wft_attempt == timer.attempt
        and ex.wft_started_event_id == 0
        and ex.sticky_task_queue != ""
    )
    if not waiting or not _sticky_poller_alive(ex):
        return False
    _move(timer, m.now + timedelta(seconds=max(ex.sticky_schedule_to_start_timeout, 1.0)))
    return True


def _move(timer: TimerTask, fire_at: datetime) -> None:
    """Fire the row later instead (on its shard)."""
    timer.fire_at = fire_at
    TimerTask.objects.filter(id=timer.id, shard_id=timer.shard_id).update(fire_at=fire_at)


def _expire(m: ExecutionMutation, timer: TimerTask) -> bool:
    """Delete a run past retention, archiving it first where its namespace asks.

    A failed archival keeps the run and tries again later: nothing is lost.
    """
    ex = m.execution
    if m.namespace.archival_enabled:
        try:
            archive_run(ex)
        except Exception:
            log.exception("archiving run %s failed; retention retries it", ex.run_id)
            _move(timer, m.now + ARCHIVAL_RETRY)
            return False
    _delete_run(ex)
    m.deleted = True
    return True


def _delete_run(ex: WorkflowExecution) -> None:
    """Delete the run and every row of it (each table with a key to the run), on its shard,
    in one statement (the foreign keys are checked at commit)."""
    write = store.Write()
    where = "= %s AND shard_id = %s"
    for relation in WorkflowExecution._meta.related_objects:
        model = relation.related_model
        assert not isinstance(model, str)
        table, column = model._meta.db_table, relation.field.column
        write.add(f"DELETE FROM {table} WHERE {column} {where}", [ex.run_id, ex.shard_id])
    write.add(
        f"DELETE FROM {WorkflowExecution._meta.db_table} WHERE run_id {where}", [ex.run_id, ex.shard_id]
    )
    store.send(write)


def _activity(ex: WorkflowExecution, timer: TimerTask) -> PendingActivity | None:
    return PendingActivity.objects.filter(
        run=ex, shard_id=ex.shard_id, scheduled_event_id=timer.scheduled_event_id
    ).first()


def _user_timer(m: ExecutionMutation, timer: TimerTask) -> bool:
    m.add_outside_event(
        EventType.TIMER_FIRED, {"timer_id": timer.timer_id, "started_event_id": timer.scheduled_event_id}
    )
    return True


def _activity_timeout(m: ExecutionMutation, timer: TimerTask) -> bool:
    activity = _activity(m.execution, timer)
    if activity is None:
        return False
    if timer.timeout_type == "SCHEDULE_TO_CLOSE":
        time_out_activity_txn(m, activity, "SCHEDULE_TO_CLOSE")
        return True
    if activity.attempt != timer.attempt:
        return False
    expected = ActivityState.SCHEDULED if timer.timeout_type == "SCHEDULE_TO_START" else ActivityState.STARTED
    if activity.state != expected:
        return False
    time_out_activity_txn(m, activity, timer.timeout_type)
    return True


def _activity_retry(m: ExecutionMutation, timer: TimerTask) -> bool:
    activity = _activity(m.execution, timer)
    if activity is None or activity.attempt != timer.attempt or activity.state != ActivityState.SCHEDULED:
        return False
    redispatch_activity_txn(m, activity)
    return True


def _workflow_task_timeout(m: ExecutionMutation, timer: TimerTask) -> bool:
    ex = m.execution
    if ex.wft_scheduled_event_id != timer.scheduled_event_id or ex.wft_attempt != timer.attempt:
        return False
    if timer.kind == TimerKind.STICKY_TIMEOUT:
        if ex.wft_started_event_id != 0:
            return False
        time_out_workflow_task_txn(m, timeout_type="SCHEDULE_TO_START")
        return True
    if ex.wft_started_event_id == 0:
        return False
    time_out_workflow_task_txn(m, timeout_type="START_TO_CLOSE")
    return True


def _workflow_timeout(m: ExecutionMutation, timer: TimerTask) -> bool:
    time_out_workflow_txn(m, run_timeout=timer.kind == TimerKind.WORKFLOW_RUN_TIMEOUT)
    return True


def _workflow_backoff(m: ExecutionMutation, timer: TimerTask) -> bool:
    m.execution.wft_backoff_until = None
    m.schedule_workflow_task()
    return True


_HANDLERS = {
    TimerKind.USER_TIMER: _user_timer,
    TimerKind.ACTIVITY_TIMEOUT: _activity_timeout,
    TimerKind.ACTIVITY_RETRY: _activity_retry,
    TimerKind.WORKFLOW_TASK_TIMEOUT: _workflow_task_timeout,
    TimerKind.STICKY_TIMEOUT: _workflow_task_timeout,
    TimerKind.WORKFLOW_RUN_TIMEOUT: _workflow_timeout,
    TimerKind.WORKFLOW_EXECUTION_TIMEOUT: _workflow_timeout,
    TimerKind.WORKFLOW_BACKOFF: _workflow_backoff,
}
