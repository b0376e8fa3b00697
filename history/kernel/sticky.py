"""Temporal's ResetStickyTaskQueue: a worker that dropped a run from its cache says so.

A run whose last workflow task completed with a sticky queue sends its next task there
with only the events that worker has not seen. A worker that evicted the run from its
cache would have to fetch the whole history before it could replay; after this call the
run is no longer sticky, so its next task goes to the normal queue, whose poll answer
carries the whole history. A task already waiting on the sticky queue moves there too
(same scheduled event and attempt), so a waiting normal poll wakes for it. Like Temporal,
it writes no history event; a closed or non-sticky run has nothing to reset.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import transaction

from chronicle.errors import ChronicleError
from history.kernel import store, tokens
from history.kernel._mutation import ExecutionMutation
from history.kernel.locks import lock_run, shard_for
from history.kernel.workflow_tasks import on_sticky_queue
from history.models import Task, TaskKind, TimerKind, TimerTask, WorkflowExecution

# The default a run's sticky schedule-to-start timeout has before any worker set one.
_DEFAULT_STICKY_TIMEOUT = WorkflowExecution._meta.get_field("sticky_schedule_to_start_timeout").get_default()

# Withdraw the run's workflow task from its sticky queue and the task's sticky timeout
# (which would otherwise time out the task on the normal queue): one statement.
_WITHDRAW_STICKY_TASK_SQL = (
    f"WITH timeouts AS (DELETE FROM {TimerTask._meta.db_table}"
    " WHERE run_id = %s AND shard_id = %s AND kind = %s AND scheduled_event_id = %s)"
    f" DELETE FROM {Task._meta.db_table}"
    " WHERE run_id = %s AND shard_id = %s AND kind = %s AND task_queue = %s AND query_id IS NULL"
    " AND scheduled_event_id = %s RETURNING visible_at"
)


def reset_sticky_task_queue(*, scope: tokens.TaskScope, workflow_id: str, run_id: str | uuid.UUID) -> None:
    """Clear the run's sticky queue; move a workflow task waiting there to the normal queue.

    ``scope`` is where the worker called from: a run of another namespace, or of another
    task queue than the call's, is refused as an unknown task is, and nothing moves.
    """
    with transaction.atomic(durable=True):
        ex = _lock_scoped_run(scope, workflow_id, run_id)
        if not ex.is_running or not ex.sticky_task_queue:
            return
        mutation = ExecutionMutation(ex, ex.namespace)
        if _waitingon_sticky_queue(ex):
            _move_to_normal_queue(mutation)
        ex.sticky_task_queue = ""
        ex.sticky_schedule_to_start_timeout = _DEFAULT_STICKY_TIMEOUT
        mutation.save()


def _lock_scoped_run(scope: tokens.TaskScope, workflow_id: str, run_id: str | uuid.UUID) -> WorkflowExecution:
    """Lock the run ``FOR UPDATE`` if it is the call's namespace's, of the call's task queue
    and has this workflow id; otherwise the answer an unknown task gets."""
    try:
        ex = lock_run(run_id, shard_for(scope.namespace_id, workflow_id))
    except ChronicleError:
        raise tokens.task_not_found() from None
    if ex.workflow_id != workflow_id:
        raise tokens.task_not_found()
    tokens.check_scope(scope, namespace_id=ex.namespace_id, queues=(ex.task_queue,))
    return ex


def _waitingon_sticky_queue(ex: WorkflowExecution) -> bool:
    """Whether the run's workflow task is scheduled on its sticky queue and not started."""
    return bool(ex.wft_scheduled_event_id) and not ex.wft_started_event_id and on_sticky_queue(ex)


def _move_to_normal_queue(mutation: ExecutionMutation) -> None:
    """The waiting task's row leaves the sticky queue and a normal-queue row (with its
    wake-up) takes its place: the same scheduled event and attempt, visible when the old
    row was (a retry's backoff is kept), or now if a poller had just claimed the old row
    (that poller's start is then refused as stale: the task is no longer on its queue)."""
    ex = mutation.execution
    withdrawn = _withdraw_sticky_task(ex)
    ex.wft_task_queue = ex.task_queue
    mutation.add_task(
        TaskKind.WORKFLOW, ex.task_queue, ex.wft_scheduled_event_id, ex.wft_attempt, visible_at=withdrawn
    )


def _withdraw_sticky_task(ex: WorkflowExecution) -> datetime | None:
    """Delete the task's sticky row and sticky timeout; when the row was to be visible."""
    scheduled = ex.wft_scheduled_event_id
    with store.bound_cursor() as cursor:
        cursor.execute(
            _WITHDRAW_STICKY_TASK_SQL,
            [
                ex.run_id,
                ex.shard_id,
                TimerKind.STICKY_TIMEOUT.value,
                scheduled,
                ex.run_id,
                ex.shard_id,
                TaskKind.WORKFLOW.value,
                ex.sticky_task_queue,
                scheduled,
            ],
        )
        visible = [row[0] for row in cursor.fetchall()]
    return max(visible, default=None)
