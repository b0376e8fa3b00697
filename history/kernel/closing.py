"""What a run's close leaves behind: its pending work dropped, its children's duties due.

Called by the unit of work as a closed run is saved (``ExecutionMutation.save``), so the
close is written with everything it implies in the same transaction. Kept apart from the
unit of work, and importing none of the kernel's operations, so that the unit of work
can rely on it without an import circle.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from django.db import connection, models

from history.kernel import store
from history.models import (
    ParentClosePolicy,
    PendingActivity,
    PendingChildExecution,
    PendingExternalRequest,
    Schedule,
    Task,
    TimerKind,
    TimerTask,
    WorkflowExecution,
)

# Timer rows a run's close keeps: its retention, and the duties that follow a child's start or close.
SURVIVE_CLOSE = frozenset(
    {TimerKind.RETENTION, TimerKind.START_CHILD, TimerKind.CHILD_CLOSED, TimerKind.PARENT_CLOSE_POLICY}
)


# Each is a part of the closing runs' one write (a data-modifying WITH member); each names
# the runs' shards besides the runs (docs/scale-out.md). The rows are found run by run
# through the table's run index (a LATERAL subquery, kept apart from the outer query by
# OFFSET 0): matched against the whole array at once, the planner scanned the whole table
# once the array held a few dozen runs, a cost that grows with the table, not the close.
def _delete_of_runs(model: type[models.Model], condition: str = "", lock: str = "") -> str:
    table = model._meta.db_table
    return (
        f"DELETE FROM {table} WHERE shard_id = ANY(%s::int[]) AND id IN ("
        f"SELECT x.id FROM unnest(%s::uuid[]) AS r(run_id) CROSS JOIN LATERAL ("
        f"SELECT id FROM {table} WHERE run_id = r.run_id AND shard_id = ANY(%s::int[]){condition} "
        f"OFFSET 0{lock}) x)"
    )


_DROP_PENDING_WORK = (
    _delete_of_runs(PendingActivity),
    _delete_of_runs(TimerTask, " AND kind <> ALL(%s::text[])"),
    _delete_of_runs(Task, lock=" FOR UPDATE SKIP LOCKED"),
    _delete_of_runs(PendingExternalRequest),
)

_KEPT_KINDS = store.array_literal(sorted(str(kind) for kind in SURVIVE_CLOSE))

_STARTED_CHILDREN = f"""
    WITH abandoned AS (
        DELETE FROM {PendingChildExecution._meta.db_table}
        WHERE run_id = %s AND shard_id = %s AND started_run_id IS NOT NULL AND parent_close_policy = %s
    )
    SELECT initiated_event_id FROM {PendingChildExecution._meta.db_table}
    WHERE run_id = %s AND shard_id = %s AND started_run_id IS NOT NULL AND parent_close_policy <> %s
    ORDER BY initiated_event_id
"""


def drop_pending_work(write: store.Write, run_ids: Sequence[uuid.UUID], shard_ids: Sequence[int]) -> None:
    """Add to ``write`` the deletion of the closed runs' activities, timers (but those that
    outlive a close), task rows and external requests. A part of the run's one write: its
    deletions see the rows as they were before the write, so the rows the same write adds
    stay. (``SKIP LOCKED``: a task row a poller holds is stale anyway and dropped on claim.)
    ``shard_ids`` are the runs' shards.
    """
    runs = store.array_literal(run_ids)
    keep = _KEPT_KINDS
    shards = store.array_literal(sorted(set(shard_ids)))
    activities, timers, tasks, requests = _DROP_PENDING_WORK
    write.add(activities, [shards, runs, shards])
    write.add(timers, [shards, runs, shards, keep])
    write.add(tasks, [shards, runs, shards])
    write.add(requests, [shards, runs, shards])


def child_duties(execution: WorkflowExecution, *, has_children: bool) -> list[tuple[str, int]]:
    """When a run closes: the duty timers due now, as ``(kind, scheduled_event_id)``: tell
    its parent (unless its chain goes on), apply its started children's close policies
    (abandoned children are simply let go).

    A run closed by a reset hands its children to the new run, which carries on as the
    child of the same parent: no one is told and no close policy applies.
    """
    duties: list[tuple[str, int]] = []
    if execution.reset_run_id is not None:
        if has_children:
            PendingChildExecution.objects.filter(run=execution, shard_id=execution.shard_id).delete()
        return duties
    if execution.parent_run_id is not None and execution.new_run_id is None:
        duties.append((TimerKind.CHILD_CLOSED, 0))
    if has_children:
        abandon = str(ParentClosePolicy.ABANDON)
        with connection.cursor() as cursor:
            run, shard = execution.run_id, execution.shard_id
            cursor.execute(_STARTED_CHILDREN, [run, shard, abandon, run, shard, abandon])
            duties += [(TimerKind.PARENT_CLOSE_POLICY, initiated) for (initiated,) in cursor.fetchall()]
    return duties


def schedule_wakeup(execution: WorkflowExecution, scheduled_by: str, now: datetime) -> TimerTask | None:
    """For a run a schedule started (its ``scheduled_by`` search attribute), the timer row
    that fires that schedule now, so it sees the close; None for any other run.

    The schedule decides overlap and starts buffered actions in its own firing; this only
    adds its timer row, so no schedule row is locked after a run row.
    """
    schedule_id = execution.search_attributes.get(scheduled_by)
    if not isinstance(schedule_id, str):
        return None
    row = (
        Schedule.objects.filter(namespace_id=execution.namespace_id, schedule_id=schedule_id)
        .values_list("id", "shard_id")
        .first()
    )
    if row is None:
        return None
    pk, shard_id = row
    return TimerTask(shard_id=shard_id, fire_at=now, kind=TimerKind.SCHEDULE, schedule_id=pk)
