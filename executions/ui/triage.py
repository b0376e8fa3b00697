"""The failure triage page: which workflow types and which failures closed runs badly.

Over a window (1 h, 24 h, 7 d) it counts the runs that closed Failed, TimedOut or
Terminated, by workflow type and by root cause: the innermost failure's message
(``visibility.root_failure_message``, not the "Activity task failed" wrapper every
activity failure shares), first line, ids and numbers masked, so one cause is one row
(``visibility.failure_message_key``). Every row links to the
executions list with the query that selects exactly its runs, and from there to a
batch reset.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from executions import visibility
from executions.ui.access import memberships, reader
from executions.ui.lists import list_url

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7)}
DEFAULT_WINDOW = "24h"


def _literal(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def bucket_query(since: datetime, status: str, *, workflow_type: str = "", message: str | None = None) -> str:
    """The visibility query selecting one triage row's runs."""
    parts = [
        f"ExecutionStatus = {_literal(status)}",
        f'CloseTime >= "{since.strftime("%Y-%m-%dT%H:%M:%SZ")}"',
    ]
    if workflow_type:
        parts.append(f"WorkflowType = {_literal(workflow_type)}")
    if message is not None:
        parts.append(f"FailureMessage = {_literal(message)}" if message else "FailureMessage IS NULL")
    return " AND ".join(parts)


def _linked(namespace: str, since: datetime, rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    for row in rows:
        if key == "workflow_type":
            query = bucket_query(since, row["status"], workflow_type=row["workflow_type"])
        else:
            query = bucket_query(since, row["status"], message=row["message"] or "")
        row["query"], row["url"] = query, list_url(namespace, query)
    return rows


@login_required
@require_GET
def triage(request: HttpRequest, namespace: str) -> HttpResponse:
    access = reader(request, namespace)
    window = request.GET.get("window", DEFAULT_WINDOW)
    window = window if window in WINDOWS else DEFAULT_WINDOW
    # Whole seconds, so the list query a row links to selects the same runs it counted.
    since = (timezone.now() - WINDOWS[window]).replace(microsecond=0)
    groups = visibility.failure_groups(access.namespace, since)
    context = {
        "access": access,
        "window": window,
        "windows": list(WINDOWS),
        "since": since,
        "by_type": _linked(namespace, since, groups["by_type"], "workflow_type"),
        "by_message": _linked(namespace, since, groups["by_message"], "message"),
        "memberships": memberships(request),
    }
    return render(request, "ui/triage.html", context)
