"""Handing a run's next workflow task straight back to the worker that caused it.

An activity's result usually schedules the run's next workflow task, on the sticky queue
of the worker that ran the workflow so far; in Temporal that worker then polls it, one
more call and transaction. When the activity ran in that same worker process, the worker
may offer, with the result, to take the task at once (``WorkflowTaskWanted``): it names
its sticky queue and holds a free workflow slot for it. If the write scheduled the run's
workflow task on exactly that queue, the same transaction starts it for that worker
(withdrawing the task row, its wake-up and the sticky timeout, as an eager start does)
and the answer carries it. Anything else — another worker's queue, a task already
pending or started, a closed run — and the task is left to the queue as before.

At least once, as ever: if the answer is lost, the started task times out after the
run's task timeout and is dispatched again.
"""

from __future__ import annotations

from dataclasses import dataclass

from history.kernel._mutation import ExecutionMutation
from history.kernel.queries import buffered_queries
from history.kernel.responses import WorkflowTaskResponse, build_workflow_task_response
from history.kernel.versioning import WorkerVersionStamp
from history.models import TaskKind


@dataclass(frozen=True)
class WorkflowTaskWanted:
    """A worker's offer to run the run's next workflow task itself."""

    sticky_task_queue: str
    identity: str
    worker_version: WorkerVersionStamp | None = None


def start_if_wanted(mutation: ExecutionMutation, wanted: WorkflowTaskWanted | None) -> bool:
    """Start, before the save, the workflow task this mutation scheduled, if ``wanted`` may
    take it; return whether it did."""
    ex = mutation.execution
    if (
        wanted is None
        or not wanted.sticky_task_queue
        or not ex.is_running
        or ex.sticky_task_queue != wanted.sticky_task_queue
        or ex.wft_task_queue != wanted.sticky_task_queue
        or ex.wft_started_event_id != 0
        or not _scheduled_by(mutation)
    ):
        return False
    mutation.start_workflow_task_inline(
        identity=wanted.identity, request_id="handed-back", worker_version=wanted.worker_version
    )
    return True


def _scheduled_by(mutation: ExecutionMutation) -> bool:
    """Whether this mutation (not an earlier write) scheduled the run's pending task."""
    scheduled = mutation.execution.wft_scheduled_event_id
    return scheduled != 0 and any(
        task.kind == TaskKind.WORKFLOW and task.scheduled_event_id == scheduled and task.query_id is None
        for task in mutation.pending_tasks
    )


def handed_back_task(mutation: ExecutionMutation) -> WorkflowTaskResponse:
    """The started task as the worker gets it, after the save: only the events its cached
    run has not seen, and the queries waiting for it."""
    response = build_workflow_task_response(mutation.execution, sticky=True)
    response.queries = buffered_queries(mutation.execution)
    return response
