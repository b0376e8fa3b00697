"""Task-queue pages: the queues a namespace's workers poll, and per queue its pollers,
backlog, health, current build and the rate limits in force."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from executions.ui.access import memberships, reader
from history.models import TaskKind
from history.schedule_words import duration_in_words
from matching import selectors
from matching.selectors import BACKLOG_AGE_ALERT, POLLER_LISTING_WINDOW, queue_health


def _thresholds() -> dict[str, str]:
    """The windows the pages explain their figures by, in words."""
    return {
        "poller_window": duration_in_words(POLLER_LISTING_WINDOW.total_seconds()),
        "backlog_alert": duration_in_words(BACKLOG_AGE_ALERT.total_seconds()),
    }


@login_required
def task_queue_list(request: HttpRequest, namespace: str) -> HttpResponse:
    access = reader(request, namespace)
    context = {
        "access": access,
        "memberships": memberships(request),
        "queues": selectors.task_queue_list(access.namespace),
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
