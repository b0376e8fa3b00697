"""Execution pages: the execution page and the operator actions on one run (terminate,
cancel, signal, reset). The list of executions is in ``executions.ui.lists``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models.fields.json import KT
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from chronicle.errors import ChronicleError, ErrorCode
from executions import audit
from executions.api import query_workflow
from executions.models import EXECUTION_ACTIONS, AuditAction, AuditEntry
from executions.ui import feedback, panels
from executions.ui.access import Access, actor, form_request_id, memberships, operator, reader
from executions.ui.panels import pretty as _pretty
from executions.ui.run_page import run_of
from history import kernel
from history.kernel.reset import (
    BuildIdPoint,
    QuickPick,
    ResetPointSummary,
    builds_seen,
    first_failure_event_id,
    reset_points,
    resolve_reset_point,
)
from history.models import HistoryEvent, WorkflowExecution
from history.vocabulary import EventType


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    """The user's namespaces; a member of one namespace goes straight to its workflows."""
    own = memberships(request)
    if len(own) == 1:
        return redirect("ui-executions", own[0].namespace.name)
    return render(request, "index.html", {"memberships": own})


# ---------------------------------------------------------------- query


def _known_query_names(access: Access, ex: WorkflowExecution) -> list[str]:
    """Query names asked of this workflow type before (workers do not report their handlers)."""
    names = (
        AuditEntry.objects.filter(
            namespace=access.namespace,
            action=AuditAction.QUERY,
            details__workflow_type=ex.workflow_type,
        )
        .values_list("details__query_type", flat=True)
        .distinct()[:50]
    )
    return sorted(str(n) for n in names if n)


SIGNAL_SOURCE_RUNS = 20


def known_signal_names(access: Access, ex: WorkflowExecution) -> list[str]:
    """Signal names the workflow type's newest signalled runs received, to suggest in the
    signal form (workers do not report their handlers). Only ``SIGNAL_SOURCE_RUNS`` runs that
    received a signal (``signal_count``) are read, so a type with long histories stays cheap."""
    recent = (
        WorkflowExecution.objects.filter(
            namespace=access.namespace, workflow_type=ex.workflow_type, signal_count__gt=0
        )
        .order_by("-start_time")
        .values("run_id")[:SIGNAL_SOURCE_RUNS]
    )
    names = (
        HistoryEvent.objects.filter(run_id__in=recent, event_type=EventType.WORKFLOW_EXECUTION_SIGNALED)
        .annotate(name=KT("attributes__signal_name"))
        .values_list("name", flat=True)
        .distinct()[:50]
    )
    return sorted(str(n) for n in names if n)


@login_required
@require_http_methods(["GET", "POST"])
def execution_query(request: HttpRequest, namespace: str, workflow_id: str, run_id: str) -> HttpResponse:
    """Ask the run's worker a query and show the answer; every query is audited.

    Any member may query (it is a read), but answers can expose data, so each one is
    recorded as ``AuditAction.QUERY`` with its name and outcome (never the answer).
    """
    access = reader(request, namespace)
    ex = run_of(access, workflow_id, run_id)
    source = request.POST if request.method == "POST" else request.GET
    form = {key: source.get(key, "").strip() for key in ("query_type", "query_args", "reason")}
    form["request_id"] = form_request_id(request)
    context: dict[str, Any] = {"access": access, "ex": ex, "action": "query", "form": form}
    context["known_queries"] = _known_query_names(access, ex)
    context["memberships"] = memberships(request)
    if request.method == "GET":
        return render(request, "ui/action.html", context)
    try:
        if not form["query_type"]:
            raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "a query name is required")
        args = panels.form_arguments(form["query_args"], "query arguments")
        answer = _audited_query(request, access, ex, form, args)
    except ChronicleError as error:
        context["error"] = error
        return render(request, "ui/action.html", context, status=error.status)
    context.update(answer_json=_pretty(panels.readable(answer)), answered_at=timezone.now())
    context["form"] = {**form, "request_id": str(uuid.uuid4())}  # the next query is a new one
    return render(request, "ui/action.html", context)


def _audited_query(
    request: HttpRequest, access: Access, ex: WorkflowExecution, form: dict[str, str], args: list[Any]
) -> Any:
    details = {"query_type": form["query_type"], "workflow_type": ex.workflow_type}
    entry = {"actor": actor(request), "action": AuditAction.QUERY, "reason": form["reason"]}
    try:
        answer = query_workflow(
            access.namespace,
            workflow_id=ex.workflow_id,
            run_id=str(ex.run_id),
            query_type=form["query_type"],
            query_args=args,
        )
    except ChronicleError as error:
        audit.record(
            access.namespace,
            request_id=form["request_id"],
            workflow_id=ex.workflow_id,
            run_id=str(ex.run_id),
            details=details,
            result=f"failed: {error.message}"[:1000],
            **entry,
        )
        raise
    audit.record(
        access.namespace,
        request_id=form["request_id"],
        workflow_id=ex.workflow_id,
        run_id=str(ex.run_id),
        details=details,
        result="answered",
        **entry,
    )
    return answer


# ---------------------------------------------------------------- operator actions


def _detail_url(access: Access, ex: WorkflowExecution, run_id: str | None = None) -> str:
    return reverse("ui-execution", args=[access.namespace.name, ex.workflow_id, run_id or str(ex.run_id)])


QUICK_PICKS: tuple[tuple[QuickPick, str], ...] = (
    ("first", "First workflow task"),
    ("last", "Last workflow task"),
    ("before_failure", "Last workflow task before the first failure"),
)
BUILD_PREFIX = "build:"


def _reset_point(raw: str) -> kernel.ResetPoint:
    """A form's point: an event id, a quick pick, or ``build:<id>`` (the kernel resolves it)."""
    if raw in ("first", "last", "before_failure"):
        return raw  # type: ignore[return-value]
    if raw.startswith(BUILD_PREFIX):
        return BuildIdPoint(raw.removeprefix(BUILD_PREFIX))
    try:
        return int(raw)
    except ValueError:
        raise ChronicleError(
            ErrorCode.INVALID_ARGUMENT,
            "reset point must be an event id, first, last, before_failure or build:<build id>",
        ) from None


def _reapply_signals(request: HttpRequest) -> bool:
    """The re-apply toggle: on unless the form's last ``reapply_signals`` value is "0".

    The form sends a hidden "0" before the checkbox's "1", so an unchecked box reads as
    off while a link without the field (a quick pick) keeps the default, on.
    """
    source = request.POST if request.method == "POST" else request.GET
    values = source.getlist("reapply_signals")
    return not values or values[-1] != "0"


def _perform(access: Access, ex: WorkflowExecution, action: str, form: dict[str, str], identity: str) -> str:
    """Run the action through the kernel; the text the audit log keeps as its result."""
    ns, wf, run, reason = access.namespace, ex.workflow_id, str(ex.run_id), form["reason"]
    if action == AuditAction.TERMINATE:
        kernel.terminate_workflow_execution(ns, workflow_id=wf, run_id=run, reason=reason, identity=identity)
        return "terminated"
    if action == AuditAction.CANCEL:
        kernel.request_cancel_workflow_execution(
            ns, workflow_id=wf, run_id=run, reason=reason, identity=identity
        )
        return "cancel requested"
    if action == AuditAction.SIGNAL:
        kernel.signal_workflow_execution(
            ns,
            workflow_id=wf,
            run_id=run,
            signal_name=form["signal_name"],
            input=panels.form_arguments(form["signal_input"], "signal input"),
            request_id=form["request_id"],
            identity=identity,
        )
        return f"signal {form['signal_name']!r} sent"
    new_run_id = kernel.reset_workflow_execution(
        ns,
        workflow_id=wf,
        run_id=run,
        point=_reset_point(form["point"]),
        reapply_signals=form["reapply_signals"] != "0",
        reason=reason,
        request_id=form["request_id"],
        identity=identity,
    )
    return new_run_id


def _action_form(request: HttpRequest) -> dict[str, str]:
    source = request.POST if request.method == "POST" else request.GET
    keys = ("reason", "request_id", "signal_name", "signal_input", "point")
    form = {key: source.get(key, "").strip() for key in keys}
    form["request_id"] = form_request_id(request)
    form["reapply_signals"] = "1" if _reapply_signals(request) else "0"
    return form


def _preview(access: Access, ex: WorkflowExecution, form: dict[str, str]) -> dict[str, Any]:
    """The kernel's preview, with its long lists tallied for reading (see :func:`_tally`)."""
    preview = kernel.preview_reset(
        access.namespace,
        workflow_id=ex.workflow_id,
        run_id=str(ex.run_id),
        point=_reset_point(form["point"]),
        reapply_signals=form["reapply_signals"] != "0",
    )
    tallies = {
        "signals_to_reapply": _tally(preview["signals_to_reapply"], lambda s: s["signal_name"]),
        "signals_not_reapplied": _tally(preview["signals_not_reapplied"], lambda s: s["signal_name"]),
        "activities_completed": _tally(
            preview["activities_completed_after_point"],
            lambda a: f"Activity {a['activity_type']} completed",
            lambda a: f"Activity {a['activity_type']} ({a['activity_id']}) completed",
        ),
        "children_started": _tally(
            preview["children_started_after_point"], lambda c: f"Child {c['workflow_id']} started"
        ),
        "signals_sent": _tally(
            preview["signals_sent_after_point"],
            lambda s: f"Signal {s['signal_name']} sent to {s['workflow_id']}",
        ),
    }
    side_effects = ("activities_completed", "children_started", "signals_sent")
    preview["tallies"] = {**tallies, "side_effects": [tallies[key] for key in side_effects]}
    return preview


TALLY_LINES = 50


def _tally(
    items: list[dict[str, Any]],
    label: Callable[[dict[str, Any]], str],
    alone: Callable[[dict[str, Any]], str] | None = None,
) -> dict[str, Any]:
    """``items`` counted by ``label``, in order of first appearance, with the first and last
    event of each: a reset over a long history did the same things thousands of times, and
    the preview says so in a line each, not in thousands. A line of one item is labelled by
    ``alone`` (for example with the activity's id). At most ``TALLY_LINES`` lines; the rest
    are counted."""
    lines: dict[str, dict[str, Any]] = {}
    for item in items:
        line = lines.setdefault(label(item), {"count": 0, "first": item, "last": item})
        line["count"] += 1
        line["last"] = item
    shown = [
        {
            "label": alone(line["first"]) if alone and line["count"] == 1 else key,
            "count": line["count"],
            "first_event_id": line["first"].get("event_id"),
            "last_event_id": line["last"].get("event_id"),
        }
        for key, line in list(lines.items())[:TALLY_LINES]
    ]
    return {"lines": shown, "more": max(0, len(lines) - TALLY_LINES)}


def _quick_picks(ex: WorkflowExecution) -> list[dict[str, Any]]:
    """Each quick pick with the event it resolves to, or why the run has none."""
    picks = []
    for value, label in QUICK_PICKS:
        try:
            picks.append({"value": value, "label": label, "event_id": resolve_reset_point(ex, value)})
        except ChronicleError as error:
            picks.append({"value": value, "label": label, "event_id": None, "why_not": error.message})
    return picks


POINTS_PAGE = 100


def _point_summary(point: ResetPointSummary) -> str:
    """One line saying what happened between a point and the next (formatted here, not in the
    template, so a long history's picker stays cheap to render)."""
    parts = [", ".join(f"{n} {kind}" for kind, n in point.events_by_type.items()) or "nothing"]
    if point.activities:
        parts.append("activities: " + ", ".join(_times(k, n) for k, n in point.activities.items()))
    if point.signals:
        parts.append("signals: " + ", ".join(_times(k, n) for k, n in point.signals.items()))
    return "; ".join(parts)


def _times(name: str, count: int) -> str:
    return f"{name} ×{count}" if count > 1 else name


def _reset_centre(request: HttpRequest, ex: WorkflowExecution, selected: int | None) -> dict[str, Any]:
    """What the reset page offers: quick picks, the builds seen and a page of eligible points.

    The picker shows ``POINTS_PAGE`` points at a time: the page holding the chosen point,
    else the latest page (``points_page`` picks another).
    """
    points = reset_points(ex)
    pages = max(1, -(-len(points) // POINTS_PAGE))
    default = next((i // POINTS_PAGE for i, p in enumerate(points) if p.event_id == selected), pages - 1)
    try:
        page = min(max(0, int(request.GET.get("points_page", default))), pages - 1)
    except ValueError:
        page = default
    shown = points[page * POINTS_PAGE : (page + 1) * POINTS_PAGE]
    return {
        "quick_picks": _quick_picks(ex),
        "builds": builds_seen(points),
        "points_total": len(points),
        "points": [{"point": p, "summary": _point_summary(p)} for p in shown],
        "points_pages": [{"index": i, "label": i + 1, "current": i == page} for i in range(pages)]
        if pages > 1
        else [],
        "first_failure": first_failure_event_id(ex),
    }


def _validate(action: str, form: dict[str, str]) -> None:
    if not form["reason"]:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "a reason is required")
    if action == AuditAction.SIGNAL and not form["signal_name"]:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "a signal name is required")
    if action == AuditAction.RESET and not form["point"]:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "a reset point is required")


def _audit_details(action: str, form: dict[str, str]) -> dict[str, Any]:
    details: dict[str, Any] = {
        key: form[key] for key in ("signal_name", "signal_input", "point") if form[key]
    }
    if action == AuditAction.RESET:
        details["reapply_signals"] = form["reapply_signals"] != "0"
    return details


@login_required
@require_http_methods(["GET", "POST"])
def execution_action(
    request: HttpRequest, namespace: str, workflow_id: str, run_id: str, action: str
) -> HttpResponse:
    if action not in EXECUTION_ACTIONS:
        raise Http404("unknown action")
    access = operator(request, namespace)
    ex = run_of(access, workflow_id, run_id)
    form = _action_form(request)
    context: dict[str, Any] = {"access": access, "ex": ex, "action": action, "form": form}
    context["memberships"] = memberships(request)
    if action == AuditAction.SIGNAL:
        context["known_signals"] = known_signal_names(access, ex)
    try:
        if action == AuditAction.RESET and form["point"]:
            context["preview"] = _preview(access, ex, form)
        if action == AuditAction.RESET:
            selected = context["preview"]["reset_event_id"] if "preview" in context else None
            context.update(_reset_centre(request, ex, selected))
        if request.method == "GET":
            return render(request, "ui/action.html", context)
        done = audit.already_done(access.namespace, form["request_id"])
        if done is None:
            _validate(action, form)
            result = _perform(access, ex, action, form, f"ui:{actor(request)}")
            done = audit.record(
                access.namespace,
                actor=actor(request),
                action=action,
                request_id=form["request_id"],
                reason=form["reason"],
                workflow_id=ex.workflow_id,
                run_id=str(ex.run_id),
                details=_audit_details(action, form),
                result=result,
            )
            feedback.announce(request, done)
    except ChronicleError as error:
        context["error"] = error
        return render(request, "ui/action.html", context, status=error.status)
    new_run = done.result if done.action == AuditAction.RESET else None
    return redirect(_detail_url(access, ex, new_run))
