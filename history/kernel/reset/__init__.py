"""Reset: start a new run from a copy of a run's history up to one workflow task.

Temporal's ``ResetWorkflowExecution`` (temporal-semantics §11), in four steps a
newcomer can follow: the :mod:`~history.kernel.reset.fold` rebuilds a run's state from
a prefix of its history; :mod:`~history.kernel.reset.points` says where a run may be
reset to (and what the UI shows about each point); the
:mod:`~history.kernel.reset.plan` says what a reset keeps, drops and re-applies,
without writing; :mod:`~history.kernel.reset.reapply` reads what to send again (signals,
updates) and carries update state over; :mod:`~history.kernel.reset.apply` writes the new
run and terminates the current one, if open, with the reason.
"""

from __future__ import annotations

from history.kernel.reset.apply import reset_workflow_execution
from history.kernel.reset.fold import ReplayedState, replay_state
from history.kernel.reset.plan import ResetPlan, plan_reset, preview_reset
from history.kernel.reset.points import (
    RESET_CAUSE,
    BuildIdPoint,
    QuickPick,
    ResetPoint,
    ResetPointSummary,
    builds_seen,
    first_failure_event_id,
    reset_points,
    resolve_reset_point,
)
from history.kernel.reset.reapply import EXCLUDE_TYPES, REAPPLY_TYPES, ReapplyChoice, reapply_choice

__all__ = [
    "EXCLUDE_TYPES",
    "REAPPLY_TYPES",
    "RESET_CAUSE",
    "BuildIdPoint",
    "QuickPick",
    "ReapplyChoice",
    "ReplayedState",
    "ResetPlan",
    "ResetPoint",
    "ResetPointSummary",
    "builds_seen",
    "first_failure_event_id",
    "plan_reset",
    "preview_reset",
    "reapply_choice",
    "replay_state",
    "reset_points",
    "reset_workflow_execution",
    "resolve_reset_point",
]
