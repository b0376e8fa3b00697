"""Reads of a task queue as an operator sees it: pollers by build, backlog, build-id changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count, Min
from django.utils import timezone

from history.kernel.versioning import wire_build_id
from history.models import Task
from matching.models import Poller
from namespaces.models import Namespace, TaskQueueBuildId

# Pollers not seen for this long are left out of a description (Temporal keeps 5 minutes).
POLLER_LISTING_WINDOW = timedelta(minutes=5)
BUILD_ID_CHANGES_SHOWN = 100


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
