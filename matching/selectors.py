"""Reads of a task queue as an operator sees it: pollers by build, backlog, build-id changes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode, invalid
from history.kernel import tokens
from history.kernel.locks import shard_for
from history.kernel.versioning import wire_build_id
from history.models import ActivityState, PendingActivity, Task, WorkflowExecution
from matching.models import Poller
from namespaces.models import Namespace, RateBucket, TaskQueueBuildId, TaskQueueLimit
from namespaces.rate_limits import LimitInForce, dispatch_bucket_key, dispatch_limit_in_force

# Pollers not seen for this long are left out of a description (Temporal keeps 5 minutes).
POLLER_LISTING_WINDOW = timedelta(minutes=5)
BUILD_ID_CHANGES_SHOWN = 100
# A task visible for longer than this without a poller taking it means the queue's
# workers are not keeping up: long-polling workers take a task within milliseconds.
BACKLOG_AGE_ALERT = timedelta(seconds=30)
HEALTHY, IDLE, BACKLOGGED, NO_POLLERS = "healthy", "idle", "backlogged", "no pollers"


def task_queue_describe(namespace: Namespace, task_queue: str) -> dict[str, Any]:
    """The queue's current build, its recent pollers with their builds, and its backlog per build."""
    now = timezone.now()
    pollers = Poller.objects.filter(
        namespace=namespace, task_queue=task_queue, last_seen_at__gte=now - POLLER_LISTING_WINDOW
    ).order_by("build_id", "kind", "identity")
    backlog = (
        Task.objects.filter(namespace=namespace, task_queue=task_queue, visible_at__lte=now)
        .values("kind", "build_id")
        .annotate(count=Count("id"), oldest=Min("visible_at"))
        .order_by("kind", "build_id")
    )
    return {
        "name": task_queue,
        "current_build_id": wire_build_id(TaskQueueBuildId.current_for(namespace, task_queue)),
        "pollers": [
            {
                "identity": p.identity,
                "build_id": wire_build_id(p.build_id),
                "task_type": p.kind,
                "last_access_time": p.last_seen_at.isoformat(),
            }
            for p in pollers
        ],
        "backlog": [
            {
                "task_type": row["kind"],
                "build_id": wire_build_id(row["build_id"]),
                "backlog_count": row["count"],
                "oldest_task_age_seconds": round((now - row["oldest"]).total_seconds(), 3),
            }
            for row in backlog
        ],
    }


def build_id_history(namespace: Namespace, task_queue: str) -> dict[str, Any]:
    """The queue's current build and the changes that led to it, newest first."""
    changes = list(
        TaskQueueBuildId.objects.filter(namespace=namespace, task_queue=task_queue).order_by("-id")[
            :BUILD_ID_CHANGES_SHOWN
        ]
    )
    return {
        "task_queue": task_queue,
        "current_build_id": changes[0].build_id if changes else None,
        "changes": [
            {"build_id": c.build_id, "set_time": c.set_time.isoformat(), "set_by": c.set_by} for c in changes
        ],
    }


def queue_health(backlog_count: int, oldest_age_seconds: float, live_pollers: int) -> str:
    """The queue-health signal: idle, healthy, backlogged (oldest task too old) or no pollers."""
    if backlog_count and oldest_age_seconds >= BACKLOG_AGE_ALERT.total_seconds():
        return BACKLOGGED
    if not live_pollers:
        return NO_POLLERS if backlog_count else IDLE
    return HEALTHY


@dataclass(frozen=True)
class QueueSeen:
    """One row of a namespace's task queues: what polls it and what waits in it."""

    name: str
    live_pollers: int
    last_poll: datetime | None
    backlog_count: int
    oldest_task_age_seconds: float

    @property
    def health(self) -> str:
        return queue_health(self.backlog_count, self.oldest_task_age_seconds, self.live_pollers)


def task_queue_list(namespace: Namespace) -> list[QueueSeen]:
    """Every queue the namespace's pollers or task rows name, by name (three grouped reads)."""
    now = timezone.now()
    polled = {
        row["task_queue"]: row
        for row in Poller.objects.filter(namespace=namespace)
        .values("task_queue")
        .annotate(last=Max("last_seen_at"))
    }
    live = dict(
        Poller.objects.filter(namespace=namespace, last_seen_at__gte=now - POLLER_LISTING_WINDOW)
        .values("task_queue")
        .annotate(n=Count("id"))
        .values_list("task_queue", "n")
    )
    waiting = {
        row["task_queue"]: row
        for row in Task.objects.filter(namespace=namespace, visible_at__lte=now)
        .values("task_queue")
        .annotate(count=Count("id"), oldest=Min("visible_at"))
    }
    return [
        QueueSeen(
            name=name,
            live_pollers=live.get(name, 0),
            last_poll=polled[name]["last"] if name in polled else None,
            backlog_count=waiting[name]["count"] if name in waiting else 0,
            oldest_task_age_seconds=(
                round((now - waiting[name]["oldest"]).total_seconds(), 3) if name in waiting else 0.0
            ),
        )
        for name in sorted(set(polled) | set(waiting))
    ]


@dataclass(frozen=True)
class QueueRateLimits:
    """The limits a queue's dispatch and its workers' requests are held to, with throttle counts."""

    dispatch: LimitInForce
    request_rps: float
    queue_throttled: int
    namespace_throttled: int


def queue_rate_limits(namespace: Namespace, task_queue: str) -> QueueRateLimits:
    """The dispatch limit in force on the queue (and where it comes from), read fresh."""
    queue_rps = (
        TaskQueueLimit.objects.filter(namespace=namespace, task_queue=task_queue)
        .values_list("dispatch_rps", flat=True)
        .first()
    )
    queue_key, namespace_key = (
        dispatch_bucket_key(namespace.id, task_queue),
        dispatch_bucket_key(namespace.id),
    )
    throttled = dict(
        RateBucket.objects.filter(key__in=[queue_key, namespace_key]).values_list("key", "throttled_count")
    )
    return QueueRateLimits(
        dispatch=dispatch_limit_in_force(namespace.dispatch_rps, queue_rps or 0.0),
        request_rps=namespace.request_rps,
        queue_throttled=throttled.get(queue_key, 0),
        namespace_throttled=throttled.get(namespace_key, 0),
    )


def started_activity_token(
    namespace: Namespace, workflow_id: str, activity_id: str, run_id: str | None = None
) -> dict[str, Any]:
    """The task token and queue of a started activity, found by its workflow and activity id.

    For completing an activity from outside the worker without having kept its token
    (Temporal's async completion by id): the caller then completes it through the usual
    token calls. The run is ``run_id`` or the workflow id's latest run; an activity that is
    not started there (unknown, still scheduled, or closed) is not found.
    """
    shard = shard_for(namespace.id, workflow_id)
    runs = WorkflowExecution.objects.filter(namespace=namespace, workflow_id=workflow_id, shard_id=shard)
    if run_id:
        try:
            runs = runs.filter(run_id=uuid.UUID(run_id))
        except ValueError:
            raise invalid("run_id must be a UUID") from None
    run = runs.order_by("-start_time").first()
    activity = (
        PendingActivity.objects.filter(
            run=run, shard_id=shard, activity_id=activity_id, state=ActivityState.STARTED
        ).first()
        if run is not None
        else None
    )
    if run is None or activity is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, "no started activity with that workflow and activity id")
    token = tokens.encode(
        "act", namespace.id, r=str(run.run_id), s=activity.scheduled_event_id, a=activity.attempt, h=shard
    )
    return {"task_token": token, "task_queue": activity.task_queue, "run_id": str(run.run_id)}
