"""A run's history growth: what it tells its workflow (Temporal's continue-as-new
suggestion, recorded on every ``WorkflowTaskStarted``) and the limits that end the run."""

from __future__ import annotations

import logging
from typing import Any

from history.models import WorkflowExecution
from namespaces.models import Namespace

log = logging.getLogger("chronicle.kernel")


def continue_as_new_suggestion(ex: WorkflowExecution, namespace: Namespace) -> dict[str, Any]:
    """What a WorkflowTaskStarted tells the workflow about its history's growth.

    ``suggest_continue_as_new`` turns true once the history, counting the Started event
    itself, reaches the namespace's event or size threshold (Temporal's 4,096 / 4 MiB).
    """
    reasons = []
    if ex.next_event_id >= namespace.history_suggest_continue_as_new_events:
        reasons.append("SUGGEST_CONTINUE_AS_NEW_REASON_TOO_MANY_HISTORY_EVENTS")
    if ex.history_size_bytes >= namespace.history_suggest_continue_as_new_bytes:
        reasons.append("SUGGEST_CONTINUE_AS_NEW_REASON_HISTORY_SIZE_TOO_LARGE")
    return {
        "history_size_bytes": ex.history_size_bytes,
        "suggest_continue_as_new": bool(reasons),
        "suggest_continue_as_new_reasons": reasons,
    }


def history_limit_reached(ex: WorkflowExecution, namespace: Namespace) -> str | None:
    """Why a running run's history is past the namespace's limits (the termination's
    reason), or None; a run past the warning count is logged."""
    if not ex.is_running:
        return None
    count = ex.next_event_id - 1
    if count >= namespace.history_count_limit:
        return "Workflow history count exceeds limit."
    if ex.history_size_bytes >= namespace.history_size_limit_bytes:
        return "Workflow history size exceeds limit."
    if count >= namespace.history_count_warn:
        log.warning("run %s has %d events (warn at %d)", ex.run_id, count, namespace.history_count_warn)
    return None
