"""Finding a run by its workflow id: the id's own URL and the other runs of that id.

People outside engineering know a workflow id (from a ticket, an order, a log line),
never a run id, so ``/ns/{ns}/workflows/{id}/`` opens the id's latest run, and every run
page lists the other runs of its id (earlier closed runs, continue-as-new and cron
successors, retries, resets) with how each one began.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models.fields.json import KT
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET

from executions.ui.access import reader
from history.models import HistoryEvent, WorkflowExecution
from namespaces.models import Namespace

RUNS_SHOWN = 20
INITIATOR_WORDS = {
    "WORKFLOW": "continued as new from",
    "RETRY": "retry of",
    "CRON_SCHEDULE": "cron run after",
}


def run_url(namespace: str, workflow_id: str, run_id: str | uuid.UUID) -> str:
    return reverse("ui-execution", args=[namespace, workflow_id, str(run_id)])


def workflow_url(namespace: str, workflow_id: str) -> str:
    return reverse("ui-workflow", args=[namespace, workflow_id])


def latest_run(namespace: Namespace, workflow_id: str) -> WorkflowExecution | None:
    """The id's newest run (by start time: a reset's, continue-as-new's or retry's new run
    always starts after the run it replaces)."""
    return (
        WorkflowExecution.objects.filter(namespace=namespace, workflow_id=workflow_id)
        .only("run_id", "workflow_id")
        .order_by("-start_time")
        .first()
    )


@login_required
@require_GET
def workflow_latest(request: HttpRequest, namespace: str, workflow_id: str) -> HttpResponse:
    """Open the workflow id's latest run (the URL to paste into a ticket)."""
    access = reader(request, namespace)
    run = latest_run(access.namespace, workflow_id)
    if run is None:
        raise Http404(f"no workflow with the id {workflow_id!r} in this namespace")
    return redirect(run_url(namespace, workflow_id, run.run_id))


@dataclass(frozen=True)
class RunOfId:
    """One run of a workflow id as the run page lists it."""

    run_id: str
    status: str
    start_time: datetime
    close_time: datetime | None
    began: str  # how it began, in words
    source_run_id: str  # the run it came from, when it came from one
    current: bool


def runs_of_id(ex: WorkflowExecution) -> tuple[list[RunOfId], int]:
    """The newest runs of ``ex``'s workflow id (``RUNS_SHOWN`` at most) and how many there are.

    Two indexed reads (``exec_wid_start``) and one of the runs' first events, for the
    initiator that tells a continue-as-new from a retry or a cron run.
    """
    same_id = WorkflowExecution.objects.filter(namespace_id=ex.namespace_id, workflow_id=ex.workflow_id)
    total = same_id.count()
    if total <= 1:
        return [], total
    rows = list(
        same_id.order_by("-start_time").values(
            "run_id", "status", "start_time", "close_time", "previous_run_id", "reset_base_run_id"
        )[:RUNS_SHOWN]
    )
    initiators = dict(
        HistoryEvent.objects.filter(run_id__in=[r["run_id"] for r in rows], event_id=1)
        .annotate(initiator=KT("attributes__initiator"))
        .values_list("run_id", "initiator")
    )
    return [_run_of_id(row, initiators.get(row["run_id"]), ex.run_id) for row in rows], total


def _run_of_id(row: Mapping[str, Any], initiator: str | None, current: uuid.UUID) -> RunOfId:
    began, source = "started", ""
    if row["reset_base_run_id"]:
        began, source = "reset from", str(row["reset_base_run_id"])
    elif row["previous_run_id"]:
        began = INITIATOR_WORDS.get(initiator or "", "continued from")
        source = str(row["previous_run_id"])
    return RunOfId(
        run_id=str(row["run_id"]),
        status=str(row["status"]),
        start_time=row["start_time"],
        close_time=row["close_time"],
        began=began,
        source_run_id=source,
        current=row["run_id"] == current,
    )
