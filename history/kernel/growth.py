"""What a run's history tells its workflow about its growth (Temporal's continue-as-new
suggestion), recorded on every ``WorkflowTaskStarted``."""

from __future__ import annotations

from typing import Any

from history.models import WorkflowExecution
from namespaces.models import Namespace


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
