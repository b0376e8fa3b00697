"""Timers a worker's sticky poll fires: its runs' due timers and their next tasks in one write.

On the usual path a sleeping run wakes in three writes: the shard owner fires the timer
(``TimerFired`` and a workflow task scheduled on the run's sticky queue, a task row and its
wake-up), the worker's sticky poll claims the task, and the worker completes it. A worker
knows when the timers of the runs it holds fall due (their ``TimerStarted`` events came
back with its completions). At that instant it polls its sticky queue naming those runs
(``due_timers``), and one transaction fires every timer of theirs that is due by the
database's clock and starts each woken task for that poll, as a start hands its first task
to an eager worker: no task row, no wake-up, no claim of its own.

Nothing changes for the timer itself: the shard owner still fires every timer on time,
whoever else asks. The two meet on the run's lock and the timer row, taken in the kernel's
order (run, then timer, ``SKIP LOCKED``), and whichever comes second finds the row gone or
taken. Only runs of the poll's namespace that are sticky to the polling queue are touched,
so a worker can fire no other worker's timers, and nothing fires early.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db import transaction

from history.faults import crash_point
from history.kernel import store
from history.kernel._mutation import ExecutionMutation, save_all
from history.kernel.handoff import WorkflowTaskWanted, handed_back_task, start_if_wanted
from history.kernel.locks import lock_runs
from history.kernel.responses import WorkflowTaskResponse
from history.kernel.timers import fire_user_timer
from history.models import TimerKind, TimerTask, WorkflowExecution

_TIMERS = TimerTask._meta.db_table
# The due user timers of the given runs, locked (others' locks skipped), due by the
# database's clock: the poll's process clock decides nothing.
_DUE_TIMERS_SQL = f"""
    SELECT {store.select_list(TimerTask, "t")} FROM {_TIMERS} t
    WHERE t.run_id = ANY(%s::uuid[]) AND t.shard_id = ANY(%s::int[]) AND t.kind = %s
      AND t.fire_at <= now()
    ORDER BY t.run_id, t.fire_at, t.id
    FOR UPDATE SKIP LOCKED
"""


def fire_due_timers_for_poll(
    namespace_id: uuid.UUID,
    wanted: WorkflowTaskWanted,
    run_ids: Sequence[uuid.UUID],
    shard_ids: Sequence[int],
    limit: int,
) -> list[WorkflowTaskResponse]:
    """Fire the due timers of up to ``limit`` of ``run_ids`` (those of ``namespace_id``
    sticky to ``wanted``'s queue) and start each woken task for ``wanted``; the started
    tasks, as a sticky poll answers them (only the events the worker has not seen)."""
    if not run_ids or limit <= 0:
        return []
    with transaction.atomic(durable=True):
        runs = {
            run_id: run
            for run_id, run in lock_runs(run_ids, shard_ids).items()
            if run.namespace_id == namespace_id
            and run.is_running
            and run.sticky_task_queue == wanted.sticky_task_queue
        }
        if not runs:
            return []
        with store.bound_cursor() as cursor:
            cursor.execute(_DUE_TIMERS_SQL, [sorted(runs), sorted(shard_ids), TimerKind.USER_TIMER])
            due = [store.load(TimerTask, row)[0] for row in cursor.fetchall()]
        started = _fire_and_start(runs, due, wanted, limit, sorted(shard_ids))
        crash_point("before_commit")
        return [handed_back_task(m) for m in started]


def _fire_and_start(
    runs: dict[uuid.UUID, WorkflowExecution],
    due: list[TimerTask],
    wanted: WorkflowTaskWanted,
    limit: int,
    shards: list[int],
) -> list[ExecutionMutation]:
    """Fire ``due`` (the timers of the first ``limit`` of ``runs`` that have any) and start
    each woken run's task; write it all."""
    mutations: dict[uuid.UUID, ExecutionMutation] = {}
    fired: list[int] = []
    for timer in due:
        run = runs.get(timer.run_id) if timer.run_id is not None else None
        if run is None:
            continue
        m = mutations.get(run.run_id)
        if m is None:
            if len(mutations) >= limit:
                continue
            m = mutations[run.run_id] = ExecutionMutation(run, run.namespace)
        fire_user_timer(m, timer)
        fired.append(timer.id)
    started = [m for m in mutations.values() if start_if_wanted(m, wanted)]
    write = store.Write()
    write.add(f"DELETE FROM {_TIMERS} WHERE id = ANY(%s) AND shard_id = ANY(%s)", [fired, shards])
    store.send(write)
    save_all(list(mutations.values()))
    return started
