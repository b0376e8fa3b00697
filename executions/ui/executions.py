"""Execution pages: the execution page and the operator actions on one run (terminate,
cancel, signal, reset). The list of executions is in ``executions.ui.lists``."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from chronicle.errors import ChronicleError, ErrorCode
from executions import audit, selectors
from executions.models import EXECUTION_ACTIONS, AuditAction, AuditEntry
from executions.ui import timeline
from executions.ui.access import Access, actor, form_request_id, memberships, operator, reader
from history import kernel
from history.models import HistoryEvent, WorkflowExecution

EVENTS_PAGE_SIZE = 50
LARGE_PAYLOAD_CHARS = 1500


def _run(access: Access, workflow_id: str, run_id: str) -> WorkflowExecution:
    try:
        return selectors.execution_get(access.namespace, workflow_id, run_id)
    except ChronicleError:
        raise Http404("workflow execution not found") from None


def index(request: HttpRequest) -> HttpResponse:
    return render(request, "index.html", {"memberships": memberships(request)})


# ---------------------------------------------------------------- execution page


def _event_rows(ex: WorkflowExecution, after: int) -> tuple[list[dict[str, Any]], int | None]:
    events, next_after = selectors.history_page(ex, after_event_id=after, page_size=EVENTS_PAGE_SIZE)
    for event in events:
        event["pretty"] = json.dumps(event["attributes"], indent=2, sort_keys=True, default=str)
        event["large"] = len(event["pretty"]) > LARGE_PAYLOAD_CHARS
    return events, next_after


def _current_task_failure(ex: WorkflowExecution) -> dict[str, Any] | None:
    """The failure of the workflow task now being retried, if the last one failed."""
    if not ex.is_running or ex.wft_attempt <= 1:
        return None
    event = HistoryEvent.objects.filter(run=ex, event_type="WorkflowTaskFailed").order_by("-event_id").first()
    if event is None:
        return None
    failure = event.attributes.get("failure") or {}
    return {"attempt": ex.wft_attempt, "cause": event.attributes.get("cause", ""), "failure": failure}


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@login_required
def execution_detail(request: HttpRequest, namespace: str, workflow_id: str, run_id: str) -> HttpResponse:
    access = reader(request, namespace)
    ex = _run(access, workflow_id, run_id)
    try:
        after = max(0, int(request.GET.get("after", "0")))
    except ValueError:
        after = 0
    events, next_after = _event_rows(ex, after)
    described = selectors.execution_describe(ex)
    context = {
        "access": access,
        "ex": ex,
        "d": described,
        "duration": (ex.close_time - ex.start_time) if ex.close_time else None,
        "task_failure": _current_task_failure(ex),
        "result_json": _pretty(described["result"]) if described["result"] is not None else "",
        "failure_json": _pretty(described["failure"]) if described["failure"] else "",
        "memo_json": _pretty(ex.memo) if ex.memo else "",
        "attrs_json": _pretty(ex.search_attributes) if ex.search_attributes else "",
        "events": events,
        "next_after": next_after,
        "timeline": timeline.build(
            ex,
            described["pending_activities"],
            namespace=namespace,
            shown=timeline.shown(events),
            page_size=EVENTS_PAGE_SIZE,
        ),
        "audit": AuditEntry.objects.filter(namespace=access.namespace, run_id=ex.run_id).order_by(
            "-created_at"
        )[:20],
        "memberships": memberships(request),
    }
    return render(request, "ui/execution.html", context)


# ---------------------------------------------------------------- operator actions


def _detail_url(access: Access, ex: WorkflowExecution, run_id: str | None = None) -> str:
    return reverse("ui-execution", args=[access.namespace.name, ex.workflow_id, run_id or str(ex.run_id)])


def _reset_point(raw: str) -> kernel.ResetPoint:
    if raw in ("first", "last"):
        return raw  # type: ignore[return-value]
    try:
        return int(raw)
    except ValueError:
        raise ChronicleError(
            ErrorCode.INVALID_ARGUMENT, "reset point must be an event id, first or last"
        ) from None


def _signal_input(raw: str) -> list[Any]:
    if not raw.strip():
        return []
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, f"signal input is not JSON: {error}") from None
    return value if isinstance(value, list) else [value]


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
            input=_signal_input(form["signal_input"]),
            request_id=form["request_id"],
            identity=identity,
        )
        return f"signal {form['signal_name']!r} sent"
    new_run_id = kernel.reset_workflow_execution(
        ns,
        workflow_id=wf,
        run_id=run,
        point=_reset_point(form["point"]),
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
    return form


def _preview(access: Access, ex: WorkflowExecution, point: str) -> dict[str, Any]:
    return kernel.preview_reset(
        access.namespace, workflow_id=ex.workflow_id, run_id=str(ex.run_id), point=_reset_point(point)
    )


def _validate(action: str, form: dict[str, str]) -> None:
    if not form["reason"]:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "a reason is required")
    if action == AuditAction.SIGNAL and not form["signal_name"]:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "a signal name is required")
    if action == AuditAction.RESET and not form["point"]:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "a reset point is required")


@login_required
@require_http_methods(["GET", "POST"])
def execution_action(
    request: HttpRequest, namespace: str, workflow_id: str, run_id: str, action: str
) -> HttpResponse:
    if action not in EXECUTION_ACTIONS:
        raise Http404("unknown action")
    access = operator(request, namespace)
    ex = _run(access, workflow_id, run_id)
    form = _action_form(request)
    context: dict[str, Any] = {"access": access, "ex": ex, "action": action, "form": form}
    try:
        if action == AuditAction.RESET and form["point"]:
            context["preview"] = preview = _preview(access, ex, form["point"])
            context["preview_json"] = _pretty(preview)
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
                details={key: form[key] for key in ("signal_name", "signal_input", "point") if form[key]},
                result=result,
            )
    except ChronicleError as error:
        context["error"] = error
        return render(request, "ui/action.html", context, status=error.status)
    new_run = done.result if done.action == AuditAction.RESET else None
    return redirect(_detail_url(access, ex, new_run))
