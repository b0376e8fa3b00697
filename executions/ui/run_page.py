"""The run page (header card, pending work, history) and the run's downloads.

The header card answers what people look for first: status, type, queue, times, how
long it took, the input, and the result or the root failure (``run_card``); for an open
run, what it waits on now. Sections with nothing to show are not drawn. The history is
compact (``history_view``). The history download is the shape the SDK's
``WorkflowHistory.from_json`` reads, so a run can be replayed from the file.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from chronicle.errors import ChronicleError
from executions import selectors
from executions.models import AuditEntry
from executions.ui import history_view, panels, run_card, runs, timeline
from executions.ui.access import Access, memberships, reader
from history.kernel.wire import event_dict
from history.models import HistoryEvent, WorkflowExecution


def run_of(access: Access, workflow_id: str, run_id: str) -> WorkflowExecution:
    """The run inside the page's namespace; 404 for anything else."""
    try:
        return selectors.execution_get(access.namespace, workflow_id, run_id)
    except ChronicleError:
        raise Http404("workflow execution not found") from None


def _current_task_failure(ex: WorkflowExecution) -> dict[str, Any] | None:
    """The failure of the workflow task now being retried, in words, if the last one failed."""
    if not ex.is_running or ex.wft_attempt <= 1:
        return None
    event = HistoryEvent.objects.filter(run=ex, event_type="WorkflowTaskFailed").order_by("-event_id").first()
    if event is None:
        return None
    failure = event.attributes.get("failure") or {}
    cause = str(event.attributes.get("cause") or "")
    return {
        "attempt": ex.wft_attempt,
        "cause": run_card.cause_words(cause),
        "raw_cause": cause,
        "failure": failure,
    }


def _payload_text(value: Any) -> str:
    return panels.pretty(panels.readable(value)) if value not in (None, [], {}) else ""


def _header(ex: WorkflowExecution, described: dict[str, Any]) -> dict[str, Any]:
    """The card's facts: the run's age, duration, input, result or root failure."""
    end = ex.close_time or timezone.now()
    return {
        "duration": end - ex.start_time,
        "input_json": _payload_text(ex.input),
        "result_json": _payload_text(described["result"]),
        "root": run_card.root_failure(ex, described["failure"]),
        "failure_json": _payload_text(described["failure"]),
    }


@login_required
@require_GET
def execution_detail(request: HttpRequest, namespace: str, workflow_id: str, run_id: str) -> HttpResponse:
    access = reader(request, namespace)
    ex = run_of(access, workflow_id, run_id)
    wanted = history_view.HistoryRequest.of(request.GET)
    events, next_page = history_view.page(ex, wanted)
    described = selectors.execution_describe(ex)
    activities = _pending_activities(described["pending_activities"])
    timers = panels.pending_timers(ex)
    other_runs, runs_total = runs.runs_of_id(ex)
    context = {
        "access": access,
        "ex": ex,
        "d": described,
        **_header(ex, described),
        "waits": run_card.waiting_on(ex, activities, timers, described["pending_children"]),
        "task_failure": _current_task_failure(ex),
        "activities": activities,
        "timers": timers,
        "children": panels.children_tree(ex),
        "lineage": panels.reset_lineage(ex),
        "memo_json": panels.pretty(ex.memo) if ex.memo else "",
        "attrs_json": panels.pretty(ex.search_attributes) if ex.search_attributes else "",
        "other_runs": other_runs,
        "runs_total": runs_total,
        "events": events,
        "history": _history_controls(ex, wanted, events, next_page),
        "timeline": timeline.build(
            ex,
            described["pending_activities"],
            namespace=namespace,
            shown=timeline.shown(events) if wanted.default else (0, -1),
            page_size=panels.EVENTS_PAGE_SIZE,
        ),
        "audit": AuditEntry.objects.filter(namespace=access.namespace, run_id=ex.run_id).order_by(
            "-created_at"
        )[:20],
        "memberships": memberships(request),
    }
    return render(request, "ui/execution.html", context)


def _history_controls(
    ex: WorkflowExecution, wanted: history_view.HistoryRequest, events: list[dict[str, Any]], next_page: str
) -> dict[str, Any]:
    """The history's filter, order and paging links, and where live mode starts.

    Live mode appends new events only to the plain oldest-first view's last page; any
    other view counts them from the run's last event, so nothing already there is counted.
    """
    ids = [e["event_id"] for e in events]
    return {
        "wanted": wanted,
        "categories": [
            {
                "key": key,
                "label": label,
                "params": wanted.params(category=key),
                "current": key == wanted.category,
            }
            for key, label in history_view.CATEGORIES.items()
        ],
        "all_params": wanted.params(category=""),
        "flip_params": history_view.HistoryRequest(
            wanted.category, not wanted.newest_first, 0, wanted.grouped
        ).params(),
        "group_params": history_view.HistoryRequest(
            wanted.category, wanted.newest_first, 0, not wanted.grouped
        ).params(),
        "next_params": next_page,
        "first_id": min(ids, default=1),
        "last_id": max(ids, default=0) if wanted.default else ex.next_event_id - 1,
        # New events join the table only in the plain oldest-first view at its last page.
        "tail": wanted.default and not next_page,
    }


def _pending_activities(described: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pending activities with the failure and heartbeat details ready to read."""
    for activity in described:
        activity["failure_json"] = panels.pretty(activity["last_failure"]) if activity["last_failure"] else ""
        activity["root_message"] = run_card.root_message(activity["last_failure"])
        details = activity["heartbeat_details"]
        activity["heartbeat_json"] = panels.pretty(panels.readable(details)) if details is not None else ""
        activity["next_retry"] = activity["next_attempt_schedule_time"] if activity["attempt"] > 1 else None
    return described


@login_required
@require_GET
def event_download(
    request: HttpRequest, namespace: str, workflow_id: str, run_id: str, event_id: int
) -> HttpResponse:
    """One event as a JSON file, with payloads kept in the payload store put back in full."""
    access = reader(request, namespace)
    ex = run_of(access, workflow_id, run_id)
    event = HistoryEvent.objects.filter(run=ex, event_id=event_id).first()
    if event is None:
        raise Http404("event not found")
    body = {
        "workflow_id": ex.workflow_id,
        "run_id": str(ex.run_id),
        "event_id": event.event_id,
        "event_type": event.event_type,
        "event_time": event.event_time.isoformat(),
        "attributes": panels.with_stored_payloads(access.namespace, event.attributes),
    }
    response = JsonResponse(body, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="{ex.run_id}-event-{event.event_id}.json"'
    return response


@login_required
@require_GET
def history_download(request: HttpRequest, namespace: str, workflow_id: str, run_id: str) -> HttpResponse:
    """The whole history as ``{"workflow_id", "run_id", "events"}``, the file the SDK's
    ``Replayer`` replays; stored payloads are put back in full, since a replay runs offline."""
    access = reader(request, namespace)
    ex = run_of(access, workflow_id, run_id)
    rows = (
        HistoryEvent.objects.filter(run=ex)
        .order_by("event_id")
        .values_list("event_id", "event_type", "event_time", "attributes")
    )
    events = [event_dict(*row) for row in rows.iterator(chunk_size=1000)]
    body = {"workflow_id": ex.workflow_id, "run_id": str(ex.run_id), "events": events}
    body = panels.with_stored_payloads(access.namespace, body)
    response = HttpResponse(json.dumps(body), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{ex.workflow_id}-{ex.run_id}-history.json"'
    return response
