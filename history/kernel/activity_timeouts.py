"""An activity's timers: a timeout (retried per its policy, or the end of the activity)
and the end of a retry's backoff, which dispatches the next attempt."""

from __future__ import annotations

from history.kernel._mutation import ExecutionMutation
from history.kernel.activity_tasks import close_activity, dispatch_attempt, fail_attempt
from history.models import PendingActivity
from history.vocabulary import EventType


def time_out_activity_txn(m: ExecutionMutation, activity: PendingActivity, timeout_type: str) -> None:
    """An activity timer fired: retry StartToClose/Heartbeat, end on the other two."""
    failure = {
        "message": f"activity {timeout_type} timeout",
        "source": "server",
        "timeout_failure_info": {
            "timeout_type": timeout_type,
            "last_heartbeat_details": activity.heartbeat_details,
        },
        "type": f"TemporalTimeout:{_title(timeout_type)}",
        "cause": activity.last_failure,
    }
    if timeout_type in ("SCHEDULE_TO_START", "SCHEDULE_TO_CLOSE"):
        close_activity(
            m,
            activity,
            EventType.ACTIVITY_TASK_TIMED_OUT,
            {
                "failure": failure,
                "retry_state": "RETRY_STATE_NON_RETRYABLE_FAILURE"
                if timeout_type == "SCHEDULE_TO_START"
                else "RETRY_STATE_TIMEOUT",
            },
        )
        return
    fail_attempt(m, activity, failure, activity.started_identity, timeout_type=timeout_type)


def _title(timeout_type: str) -> str:
    return "".join(part.capitalize() for part in timeout_type.split("_"))


def redispatch_activity_txn(m: ExecutionMutation, activity: PendingActivity) -> None:
    """A retry backoff ended: put the next attempt on its queue."""
    dispatch_attempt(m, activity)
