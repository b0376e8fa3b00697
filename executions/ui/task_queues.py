"""Task-queue pages: the queues a namespace's workers poll, and per queue its pollers,
backlog, health, current build and the rate limits in force."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from executions.ui.access import memberships, reader
from history.models import TaskKind
from history.schedule_words import duration_in_words
from matching import selectors
from matching.dispatch import STICKY_POLLER_LIVENESS
from matching.models import Poller
from matching.selectors import BACKLOG_AGE_ALERT, POLLER_LISTING_WINDOW, queue_health
from namespaces.models import Namespace


def _thresholds() -> dict[str, str]:
    """The windows the pages explain their figures by, in words."""
    return {
        "poller_window": duration_in_words(POLLER_LISTING_WINDOW.total_seconds()),
        "backlog_alert": duration_in_words(BACKLOG_AGE_ALERT.total_seconds()),
    }


# An SDK worker process polls its own sticky queue, named after the queue it serves.
STICKY_NAME = re.compile(r"^(?P<queue>.+)-sticky-[0-9a-f]{12}$")


@dataclass(frozen=True)
class StickyQueue:
    """One worker process's sticky queue, shown under the queue it serves."""

    name: str
    worker: str
    last_poll: datetime | None
    polling: bool  # seen within the liveness window matching itself uses for sticky queues
    backlog_count: int


@dataclass
class QueueRow:
    queue: selectors.QueueSeen
    sticky: list[StickyQueue] = field(default_factory=list)

    @property
    def sticky_gone(self) -> int:
        return sum(1 for s in self.sticky if not s.polling)


def fold_sticky_queues(namespace: Namespace, queues: list[selectors.QueueSeen]) -> list[QueueRow]:
    """Each queue with the sticky queues of the worker processes serving it folded under it.

    Every worker process (every restart) adds a sticky queue, so listing them as queues
    buried the real ones, and a dead worker's sticky queue read as healthy. A sticky queue
    is "polling" only while its worker was seen within ``STICKY_POLLER_LIVENESS``; its
    worker's identity comes from one read of the sticky queues' pollers.
    """
    rows = {q.name: QueueRow(q) for q in queues if not _sticky_of(q.name, queues)}
    sticky = [q for q in queues if q.name not in rows]
    workers = dict(
        Poller.objects.filter(namespace=namespace, task_queue__in=[q.name for q in sticky])
        .order_by("task_queue", "last_seen_at")
        .values_list("task_queue", "identity")
    )
    alive_since = timezone.now() - STICKY_POLLER_LIVENESS
    for q in sticky:
        polling = q.last_poll is not None and q.last_poll >= alive_since
        row = StickyQueue(q.name, workers.get(q.name, ""), q.last_poll, polling, q.backlog_count)
        rows[_sticky_of(q.name, queues)].sticky.append(row)
    return list(rows.values())


def _sticky_of(name: str, queues: list[selectors.QueueSeen]) -> str:
    """The listed queue ``name`` is the sticky queue of, or ""."""
    match = STICKY_NAME.match(name)
    return match["queue"] if match and any(q.name == match["queue"] for q in queues) else ""


@login_required
@require_GET
def task_queue_list(request: HttpRequest, namespace: str) -> HttpResponse:
    access = reader(request, namespace)
    context = {
        "access": access,
        "memberships": memberships(request),
        "rows": fold_sticky_queues(access.namespace, selectors.task_queue_list(access.namespace)),
        **_thresholds(),
    }
    return render(request, "ui/task_queues.html", context)


@dataclass(frozen=True)
class KindBacklog:
    """One kind's backlog over all builds: the count and the age of its oldest task."""

    kind: str
    count: int
    oldest_age_seconds: float
    by_build: list[dict[str, Any]]


def _backlog_by_kind(backlog: list[dict[str, Any]]) -> list[KindBacklog]:
    kinds = []
    for kind in TaskKind.values:
        rows = [row for row in backlog if row["task_type"] == kind]
        kinds.append(
            KindBacklog(
                kind=kind,
                count=sum(row["backlog_count"] for row in rows),
                oldest_age_seconds=max((row["oldest_task_age_seconds"] for row in rows), default=0.0),
                by_build=rows,
            )
        )
    return kinds


@login_required
@require_GET
def task_queue_detail(request: HttpRequest, namespace: str, task_queue: str) -> HttpResponse:
    access = reader(request, namespace)
    described = selectors.task_queue_describe(access.namespace, task_queue)
    backlog = _backlog_by_kind(described["backlog"])
    total = sum(kind.count for kind in backlog)
    oldest = max(kind.oldest_age_seconds for kind in backlog)
    context = {
        "access": access,
        "memberships": memberships(request),
        "q": described,
        "backlog": backlog,
        "health": queue_health(total, oldest, len(described["pollers"])),
        "backlog_total": total,
        "oldest_age_seconds": oldest,
        "builds": selectors.build_id_history(access.namespace, task_queue)["changes"][:10],
        "limits": selectors.queue_rate_limits(access.namespace, task_queue),
        **_thresholds(),
    }
    return render(request, "ui/task_queue.html", context)
