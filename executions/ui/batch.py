"""Batch pages: start a batch operation from a list query (dry run first), follow a job's
progress live, change its rate while it runs, stop it, and list the namespace's jobs.

The pages call the batch service (``executions.batch``), which the REST API uses too;
the runner (``manage.py run_batch_jobs``) does the work. Starting, re-rating and stopping
need the operator role and are audited.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chronicle.errors import ChronicleError, invalid
from executions import audit, batch
from executions.models import AuditAction, BatchJob, BatchOperation, BatchState
from executions.ui import errors, feedback, panels
from executions.ui.access import Access, actor, form_request_id, memberships, operator, reader
from executions.ui.lists import list_url

FORM_FIELDS: tuple[str, ...] = ("q", "operation", "reason", "rps", "job_id", "reset_type", "reapply_signals")
FORM_FIELDS += ("signal_name", "signal_input", "confirmed_count", "request_id")


def _job(access: Access, job_id: str) -> BatchJob:
    try:
        return batch.job_get(access.namespace, job_id)
    except ChronicleError:
        raise Http404("batch job not found") from None


def _job_url(access: Access, job: BatchJob) -> str:
    return reverse("ui-batch-job", args=[access.namespace.name, job.job_id])


def progress(job: BatchJob) -> dict[str, Any]:
    """The job as the job page's poller reads it, with the rate achieved so far."""
    described = batch.job_describe(job)
    elapsed = ((job.finished_at or job.updated_at) - job.created_at).total_seconds()
    processed = job.done + job.failed
    described["rate"] = round(processed / elapsed, 1) if elapsed > 0 and processed else 0.0
    return described


@login_required
@require_GET
def job_list(request: HttpRequest, namespace: str) -> HttpResponse:
    access = reader(request, namespace)
    context = {
        "access": access,
        "jobs": batch.job_list(access.namespace),
        "memberships": memberships(request),
    }
    return render(request, "ui/batch_list.html", context)


# ---------------------------------------------------------------- starting a job


def _form(request: HttpRequest) -> dict[str, str]:
    source = request.POST if request.method == "POST" else request.GET
    form = {key: source.get(key, "").strip() for key in FORM_FIELDS}
    form["operation"] = form["operation"] or BatchOperation.TERMINATE
    form["rps"] = form["rps"] or "50"
    form["reset_type"] = form["reset_type"] or "FirstWorkflowTask"
    form["request_id"] = form_request_id(request)
    return form


def _params(form: dict[str, str]) -> dict[str, Any]:
    """The operation's parameters from the form, as the batch service takes them."""
    return {
        "reset_type": form["reset_type"],
        "reapply_signals": form["reapply_signals"] == "on",
        "signal_name": form["signal_name"],
        "signal_input": panels.form_arguments(form["signal_input"], "signal input")
        if form["operation"] == BatchOperation.SIGNAL
        else [],
    }


def _rps(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise invalid("the rate must be a number of operations per second") from None


def _start(access: Access, request: HttpRequest, form: dict[str, str]) -> BatchJob:
    if form["operation"] not in BatchOperation.values:
        raise invalid(f"unknown operation {form['operation']!r}")
    if not form["confirmed_count"]:
        raise invalid("run the dry run first, then start the job from its result")
    job = batch.create_job(
        access.namespace,
        operation=form["operation"],
        query=form["q"],
        reason=form["reason"],
        params=_params(form),
        rps=_rps(form["rps"]),
        job_id=form["job_id"],
        created_by=f"ui:{actor(request)}",
    )
    started = audit.record(
        access.namespace,
        actor=actor(request),
        action=AuditAction.BATCH_START,
        request_id=form["request_id"],
        reason=form["reason"],
        target=f"batch:{job.job_id}",
        details={"operation": job.operation, "query": job.query, "params": job.params, "total": job.total},
        new={"rps": job.rps},
        result=job.job_id,
    )
    feedback.announce(request, started)
    return job


@login_required
@require_http_methods(["GET", "POST"])
def job_new(request: HttpRequest, namespace: str) -> HttpResponse:
    """GET: the form, and with ``dry_run`` the count and first matches; POST: start the job."""
    access = operator(request, namespace)
    form = _form(request)
    context: dict[str, Any] = {"access": access, "form": form, "memberships": memberships(request)}
    context.update(operations=BatchOperation.values, reset_types=list(batch.RESET_TYPES))
    context["list_url"] = list_url(namespace, form["q"])
    try:
        if request.method == "POST":
            done = audit.already_done(access.namespace, form["request_id"])
            job = batch.job_get(access.namespace, done.result) if done else _start(access, request, form)
            return redirect(_job_url(access, job))
        if "dry_run" in request.GET:
            batch.validate_params(form["operation"], _params(form))
            context["dry_run"] = batch.dry_run(access.namespace, form["q"])
    except ChronicleError as error:
        context["error"] = error
        return render(request, "ui/batch_new.html", context, status=error.status)
    return render(request, "ui/batch_new.html", context)


# ---------------------------------------------------------------- one job


@login_required
@require_GET
def job_detail(request: HttpRequest, namespace: str, job_id: str) -> HttpResponse:
    access = reader(request, namespace)
    job = _job(access, job_id)
    context = {
        "access": access,
        "job": progress(job),
        "running": job.state == BatchState.RUNNING,
        "list_url": list_url(namespace, job.query),
        "request_id": form_request_id(request),
        "memberships": memberships(request),
    }
    return render(request, "ui/batch_job.html", context)


@login_required
@require_GET
def job_progress(request: HttpRequest, namespace: str, job_id: str) -> JsonResponse:
    access = reader(request, namespace)
    return JsonResponse(progress(_job(access, job_id)))


@login_required
@require_POST
def job_rate(request: HttpRequest, namespace: str, job_id: str) -> HttpResponse:
    access = operator(request, namespace)
    job = _job(access, job_id)
    request_id = form_request_id(request)
    if audit.already_done(access.namespace, request_id) is None:
        try:
            changed = batch.set_rps(access.namespace, job.job_id, _rps(request.POST.get("rps", "")))
        except ChronicleError as error:
            return errors.refused(request, error.message, error.status)
        rated = audit.record(
            access.namespace,
            actor=actor(request),
            action=AuditAction.BATCH_RATE,
            request_id=request_id,
            target=f"batch:{job.job_id}",
            old={"rps": job.rps},
            new={"rps": changed.rps},
        )
        feedback.announce(request, rated)
    return redirect(_job_url(access, job))


@login_required
@require_POST
def job_stop(request: HttpRequest, namespace: str, job_id: str) -> HttpResponse:
    access = operator(request, namespace)
    job = _job(access, job_id)
    request_id = form_request_id(request)
    reason = request.POST.get("reason", "").strip()
    if audit.already_done(access.namespace, request_id) is None:
        if not reason:
            return errors.refused(request, "a reason is required", 400)
        stopped = batch.stop_job(access.namespace, job.job_id, reason)
        halted = audit.record(
            access.namespace,
            actor=actor(request),
            action=AuditAction.BATCH_STOP,
            request_id=request_id,
            reason=reason,
            target=f"batch:{job.job_id}",
            old={"state": job.state},
            new={"state": stopped.state},
        )
        feedback.announce(request, halted)
    return redirect(_job_url(access, job))
