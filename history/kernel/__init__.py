"""The kernel: the one write path for executions (DESIGN §4).

Every public operation runs in its own durable transaction and reads top to bottom:
lock the run ``FOR UPDATE`` → validate (task tokens, commands, limits) → append events
with consecutive ids, update mutable state, insert/delete task and timer rows →
``pg_notify`` (delivered at commit) → commit, then answer. A return means durable.
REST views, the shard-owner daemon and management commands call these functions;
nothing else writes history.

Modules a newcomer can name: the unit of work (``_mutation``, private: its
:class:`ExecutionMutation` is exported here for tests and benchmarks that write a run
directly) and the SQL it sends (``store``); run locks (``locks``); the wake-up keys
listeners share (``wakeups``); starts (``start``), client operations on a run
(``client_operations``) and how a run closes (``close``); workflow, activity and query
tasks (``workflow_tasks``, ``activity_tasks``, ``activity_timeouts``, ``queries``), the task
handed back or run ahead with an activity's result (``handoff``, ``run_ahead``); updates
(``updates``); timers, transfers, children and schedules; reset (``reset/``: fold, points,
plan, apply). Event and command names come from :mod:`history.vocabulary`.
"""

from __future__ import annotations

from history.kernel._mutation import ExecutionMutation
from history.kernel.activity_tasks import (
    record_activity_task_heartbeat,
    record_activity_task_started_txn,
    respond_activity_task_canceled,
    respond_activity_task_completed,
    respond_activity_task_failed,
)
from history.kernel.client_operations import (
    create_query,
    request_cancel_workflow_execution,
    signal_workflow_execution,
    terminate_workflow_execution,
)
from history.kernel.completions import (
    CompletionResult,
    respond_workflow_task_completed,
    respond_workflow_tasks_completed,
)
from history.kernel.queries import respond_query_task_completed
from history.kernel.reset import ResetPoint, preview_reset, reset_workflow_execution
from history.kernel.responses import WorkflowTaskResponse
from history.kernel.run_ahead import ActivityReported, WorkflowTaskAhead, report_activity_task_completed
from history.kernel.schedules import (
    Backfill,
    ScheduleDefinition,
    backfill_schedule,
    create_schedule,
    delete_schedule,
    pause_schedule,
    trigger_schedule,
    update_schedule,
)
from history.kernel.start import StartRequest, StartResult, start_workflow_execution
from history.kernel.sticky import reset_sticky_task_queue
from history.kernel.timers import ShardFence, ShardFenceLost, due_timer_rows, fire_timers
from history.kernel.tokens import TaskScope
from history.kernel.updates import (
    UpdateRequest,
    UpdateStatus,
    find_update,
    update_workflow_execution,
)
from history.kernel.workflow_tasks import (
    WorkflowTaskClaim,
    record_workflow_task_started_txn,
    record_workflow_tasks_started_txn,
    respond_workflow_task_failed,
)

__all__ = [
    "ActivityReported",
    "Backfill",
    "CompletionResult",
    "ExecutionMutation",
    "ResetPoint",
    "ScheduleDefinition",
    "ShardFence",
    "ShardFenceLost",
    "StartRequest",
    "StartResult",
    "TaskScope",
    "UpdateRequest",
    "UpdateStatus",
    "WorkflowTaskAhead",
    "WorkflowTaskClaim",
    "WorkflowTaskResponse",
    "backfill_schedule",
    "create_query",
    "create_schedule",
    "delete_schedule",
    "due_timer_rows",
    "find_update",
    "fire_timers",
    "pause_schedule",
    "preview_reset",
    "record_activity_task_heartbeat",
    "record_activity_task_started_txn",
    "record_workflow_task_started_txn",
    "record_workflow_tasks_started_txn",
    "report_activity_task_completed",
    "request_cancel_workflow_execution",
    "reset_sticky_task_queue",
    "reset_workflow_execution",
    "respond_activity_task_canceled",
    "respond_activity_task_completed",
    "respond_activity_task_failed",
    "respond_query_task_completed",
    "respond_workflow_task_completed",
    "respond_workflow_task_failed",
    "respond_workflow_tasks_completed",
    "signal_workflow_execution",
    "start_workflow_execution",
    "terminate_workflow_execution",
    "trigger_schedule",
    "update_schedule",
    "update_workflow_execution",
]
