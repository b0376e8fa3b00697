"""Schedule pages: the list, a schedule's page (spec in words, recent and upcoming actions,
policies) and the operator actions on it (pause, unpause, trigger, backfill, delete).

Every action goes through the kernel's schedule operations, behind a confirmation form
with a reason, and is written to the audit log with the schedule id as its target.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from chronicle.errors import ChronicleError, invalid
from executions import audit, selectors
from executions.models import AuditAction, AuditEntry
from executions.ui import feedback
from executions.ui.access import Access, actor, form_request_id, memberships, operator, reader
from history import kernel
from history.kernel.schedules import DEFAULT_CATCHUP_WINDOW, MIN_CATCHUP_WINDOW, OVERLAP_POLICIES
from history.models import Schedule, WorkflowExecution
from history.schedule_words import describe_spec, duration_in_words, spec_summary

LIST_PAGE_SIZE = 50
ACTIONS = {
    "pause": AuditAction.SCHEDULE_PAUSE,
    "unpause": AuditAction.SCHEDULE_UNPAUSE,
    "trigger": AuditAction.SCHEDULE_TRIGGER,
    "backfill": AuditAction.SCHEDULE_BACKFILL,
    "delete": AuditAction.SCHEDULE_DELETE,
}
# The submit button of each confirmation form; each starts with the action's name.
BUTTONS = {
    "pause": "Pause schedule",
    "unpause": "Unpause schedule",
    "trigger": "Trigger now",
    "backfill": "Backfill",
    "delete": "Delete schedule",
}


def _schedule(access: Access, schedule_id: str) -> Schedule:
    try:
        return selectors.schedule_get(access.namespace, schedule_id)
    except ChronicleError:
        raise Http404("schedule not found") from None


def _statuses(access: Access, run_ids: list[str]) -> dict[str, str]:
    """The status of each run a schedule of this namespace started, in one read."""
    rows = WorkflowExecution.objects.filter(namespace=access.namespace, run_id__in=run_ids).values_list(
        "run_id", "status"
    )
    return {str(run_id): status for run_id, status in rows}


def _recent_actions(access: Access, described: dict[str, Any]) -> list[dict[str, Any]]:
    """Recent actions newest first, each with the status of the run it started."""
    recent = list(reversed(described["info"]["recent_actions"]))
    statuses = _statuses(access, [a["run_id"] for a in recent])
    return [{**a, "status": statuses.get(a["run_id"], "deleted")} for a in recent]


def _times(values: list[str]) -> list[datetime]:
    return [datetime.fromisoformat(v) for v in values]


# ---------------------------------------------------------------- list


@dataclass(frozen=True)
class ScheduleRow:
    schedule_id: str
    summary: str
    paused: bool
    note: str
    next_action: datetime | None
    last_action: dict[str, Any] | None
    running: int


def _row(described: dict[str, Any], statuses: dict[str, str]) -> ScheduleRow:
    info, state = described["info"], described["schedule"]["state"]
    last = info["recent_actions"][-1] if info["recent_actions"] else None
    upcoming = _times(info["next_action_times"][:1])
    return ScheduleRow(
        schedule_id=described["schedule_id"],
        summary=spec_summary(described["schedule"]["spec"]),
        paused=state["paused"],
        note=state["note"],
        next_action=upcoming[0] if upcoming and not state["paused"] else None,
        last_action={**last, "status": statuses.get(last["run_id"], "deleted")} if last else None,
        running=len(info["running_actions"]),
    )


@login_required
@require_GET
def schedule_list(request: HttpRequest, namespace: str) -> HttpResponse:
    access = reader(request, namespace)
    try:
        described, next_cursor = selectors.schedule_list(
            access.namespace, page_size=LIST_PAGE_SIZE, cursor=request.GET.get("cursor", "")
        )
    except ChronicleError as error:  # a cursor this namespace's list did not mint
        return HttpResponse(error.message, status=error.status, content_type="text/plain")
    lasts = [d["info"]["recent_actions"][-1]["run_id"] for d in described if d["info"]["recent_actions"]]
    statuses = _statuses(access, lasts)
    context = {
        "access": access,
        "memberships": memberships(request),
        "rows": [_row(d, statuses) for d in described],
        "next_cursor": next_cursor,
    }
    return render(request, "ui/schedules.html", context)


# ---------------------------------------------------------------- detail


def _policy(policy: dict[str, Any]) -> dict[str, Any]:
    """The policies as they apply, defaults filled in and durations in words."""
    window = policy.get("catchup_window")
    seconds = DEFAULT_CATCHUP_WINDOW.total_seconds() if window is None else float(window)
    seconds = max(seconds, MIN_CATCHUP_WINDOW.total_seconds())
    return {
        "overlap": policy.get("overlap") or "SKIP",
        "catchup_window": duration_in_words(seconds),
        "pause_on_failure": bool(policy.get("pause_on_failure")),
    }


@login_required
@require_GET
def schedule_detail(request: HttpRequest, namespace: str, schedule_id: str) -> HttpResponse:
    access = reader(request, namespace)
    described = selectors.schedule_describe(_schedule(access, schedule_id))
    spec = described["schedule"]["spec"]
    context = {
        "access": access,
        "memberships": memberships(request),
        "s": described,
        "state": described["schedule"]["state"],
        "action": described["schedule"]["action"],
        "spec_words": describe_spec(spec),
        "jitter": duration_in_words(float(spec.get("jitter") or 0)) if spec.get("jitter") else "",
        "policy": _policy(described["schedule"]["policy"]),
        "recent": _recent_actions(access, described),
        "upcoming": _times(described["info"]["next_action_times"]),
        "audit": AuditEntry.objects.filter(
            namespace=access.namespace, target=schedule_id, action__startswith="schedule."
        ).order_by("-created_at")[:20],
    }
    return render(request, "ui/schedule.html", context)


# ---------------------------------------------------------------- actions


def _action_form(request: HttpRequest) -> dict[str, str]:
    source = request.POST if request.method == "POST" else request.GET
    keys = ("reason", "note", "overlap", "start_at", "end_at")
    form = {key: source.get(key, "").strip() for key in keys}
    form["request_id"] = form_request_id(request)
    return form


def _instant(raw: str, label: str) -> datetime:
    """A time from the form (``datetime-local`` gives no zone: the page asks for UTC)."""
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise invalid(f"{label} must be a date and time such as 2026-12-01T09:00") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _validate(action: str, form: dict[str, str]) -> None:
    if not form["reason"]:
        raise invalid("a reason is required")
    if form["overlap"] and form["overlap"] not in OVERLAP_POLICIES:
        raise invalid(f"unknown overlap policy {form['overlap']!r}")
    if action == "backfill" and not (form["start_at"] and form["end_at"]):
        raise invalid("a backfill needs a start and an end time")


@dataclass(frozen=True)
class Outcome:
    """What an action did, in the audit log's terms."""

    result: str
    old: Any = None
    new: Any = None
    details: dict[str, Any] | None = None


def _state(schedule: Schedule) -> dict[str, Any]:
    return {"paused": schedule.paused, "note": schedule.note}


def _started_since(before: int, schedule: Schedule) -> list[dict[str, str]]:
    started = schedule.num_actions - before
    return schedule.recent_actions[-started:] if started > 0 else []


def _perform(access: Access, schedule: Schedule, action: str, form: dict[str, str]) -> Outcome:
    """Run the action through the kernel and say what it did."""
    ns, sid = access.namespace, schedule.schedule_id
    if action in ("pause", "unpause"):
        old = _state(schedule)
        changed = kernel.pause_schedule(
            ns, sid, paused=action == "pause", note=form["note"] or form["reason"]
        )
        return Outcome(f"{action}d", old=old, new=_state(changed))
    if action == "delete":
        definition = selectors.schedule_describe(schedule)["schedule"]
        kernel.delete_schedule(ns, sid)
        return Outcome("deleted", old=definition)
    before = schedule.num_actions
    details: dict[str, Any] = {"overlap": form["overlap"] or "schedule policy"}
    if action == "trigger":
        changed = kernel.trigger_schedule(ns, sid, overlap=form["overlap"])
    else:
        start, end = _instant(form["start_at"], "start"), _instant(form["end_at"], "end")
        backfill = kernel.Backfill(start_at=start, end_at=end, overlap=form["overlap"])
        changed = kernel.backfill_schedule(ns, sid, [backfill])
        details.update(start_at=start.isoformat(), end_at=end.isoformat())
    started = _started_since(before, changed)
    details["started"] = started
    return Outcome(_started_words(changed.num_actions - before), details=details)


def _started_words(count: int) -> str:
    if count <= 0:
        return "no workflow started (overlap policy or nothing due)"
    return f"{count} workflow{'s' if count != 1 else ''} started"


@login_required
@require_http_methods(["GET", "POST"])
def schedule_action(request: HttpRequest, namespace: str, schedule_id: str, action: str) -> HttpResponse:
    if action not in ACTIONS:
        raise Http404("unknown action")
    access = operator(request, namespace)
    form = _action_form(request)
    done = audit.already_done(access.namespace, form["request_id"]) if request.method == "POST" else None
    if done is not None:
        return _after(access, done)
    schedule = _schedule(access, schedule_id)
    context: dict[str, Any] = {
        "access": access,
        "memberships": memberships(request),
        "schedule": schedule,
        "action": action,
        "button": BUTTONS[action],
        "form": form,
        "overlaps": OVERLAP_POLICIES,
        "current_overlap": _policy(schedule.policy)["overlap"],
    }
    if request.method == "GET":
        return render(request, "ui/schedule_action.html", context)
    try:
        _validate(action, form)
        outcome = _perform(access, schedule, action, form)
    except ChronicleError as error:
        context["error"] = error
        return render(request, "ui/schedule_action.html", context, status=error.status)
    entry = audit.record(
        access.namespace,
        actor=actor(request),
        action=ACTIONS[action],
        request_id=form["request_id"],
        reason=form["reason"],
        target=schedule_id,
        details=outcome.details,
        old=outcome.old,
        new=outcome.new,
        result=outcome.result,
    )
    feedback.announce(request, entry)
    return _after(access, entry)


def _after(access: Access, entry: AuditEntry) -> HttpResponse:
    """Where a done action lands: the schedule's page, or the list after a delete."""
    if entry.action == AuditAction.SCHEDULE_DELETE:
        return redirect(reverse("ui-schedules", args=[access.namespace.name]))
    return redirect(reverse("ui-schedule", args=[access.namespace.name, entry.target]))
