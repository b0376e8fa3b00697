"""Batch operations: reset, terminate, cancel or signal every run a visibility query matches.

A job is created with the runs its query matches at that moment (runs started later,
including the runs its own resets create, are never part of it). The runner
(:mod:`executions.batch_runner`) applies the operation to each run through the kernel.
Every item is idempotent by construction, so a chunk repeated after a crash changes
nothing twice: resets and signals carry a request id derived from the job and the run,
and terminate or cancel of a run already closed counts as done.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode, invalid
from executions import visibility
from executions.models import MAX_RECORDED_FAILURES, BatchJob, BatchOperation, BatchState
from history import kernel
from history.kernel.responses import execution_summary
from history.models import WorkflowExecution
from namespaces.models import Namespace

DRY_RUN_SAMPLE = 20
MAX_RPS = 1000.0
RESET_TYPES = {"FirstWorkflowTask": "first", "LastWorkflowTask": "last"}


# -- selection ------------------------------------------------------------------------------
def select_runs(namespace: Namespace, query: str) -> QuerySet[WorkflowExecution]:
    """The runs matching the visibility ``query``; an empty query matches every run."""
    return visibility.search(namespace, query)


def job_runs(job: BatchJob) -> QuerySet[WorkflowExecution]:
    """The job's runs: its query's matches that had started when the job was created."""
    return select_runs(job.namespace, job.query).filter(start_time__lte=job.created_at)


# -- jobs -----------------------------------------------------------------------------------
def validate_params(operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """The operation's own parameters, checked and normalised."""
    if operation == BatchOperation.RESET:
        reset_type = params.get("reset_type") or "FirstWorkflowTask"
        if reset_type not in RESET_TYPES:
            raise invalid("a batch reset takes reset_type FirstWorkflowTask or LastWorkflowTask")
        return {"reset_type": reset_type, "reapply_signals": bool(params.get("reapply_signals", True))}
    if operation == BatchOperation.SIGNAL:
        name = params.get("signal_name")
        if not isinstance(name, str) or not name or len(name) > 1000:
            raise invalid("a batch signal needs signal_name (1 to 1000 characters)")
        return {"signal_name": name, "input": list(params.get("signal_input") or [])}
    return {}


def create_job(
    namespace: Namespace,
    *,
    operation: str,
    query: str,
    reason: str,
    params: dict[str, Any],
    rps: float,
    job_id: str = "",
    created_by: str = "",
) -> BatchJob:
    """Record a running job over the query's current matches; 409 if one is already running."""
    if operation not in BatchOperation.values:
        raise invalid(f"unknown operation {operation!r}", known=BatchOperation.values)
    if not reason.strip():
        raise invalid("reason is required")
    now = timezone.now()
    job = BatchJob(
        namespace=namespace,
        job_id=job_id or str(uuid.uuid4()),
        operation=operation,
        query=query,
        params=validate_params(operation, params),
        reason=reason,
        created_by=created_by,
        rps=_check_rps(rps),
        created_at=now,
        updated_at=now,
    )
    job.total = job_runs(job).count()
    try:
        with transaction.atomic():
            job.save(force_insert=True)
    except IntegrityError:
        if BatchJob.objects.filter(namespace=namespace, job_id=job.job_id).exists():
            raise ChronicleError(ErrorCode.CONFLICT, f"batch job {job.job_id!r} already exists") from None
        raise ChronicleError(
            ErrorCode.CONFLICT, "another batch operation is running in this namespace; stop it or wait"
        ) from None
    return job


def dry_run(namespace: Namespace, query: str) -> dict[str, Any]:
    """How many runs a job would cover now, and the first of them (newest first)."""
    runs = select_runs(namespace, query)
    sample = runs.order_by("-start_time", "-run_id")[:DRY_RUN_SAMPLE]
    return {"count": runs.count(), "executions": [execution_summary(r) for r in sample]}


def _check_rps(rps: float) -> float:
    if not 0 < rps <= MAX_RPS:
        raise invalid(f"rps must be above 0 and at most {MAX_RPS:g}")
    return float(rps)


def job_get(namespace: Namespace, job_id: str) -> BatchJob:
    job = BatchJob.objects.filter(namespace=namespace, job_id=job_id).select_related("namespace").first()
    if job is None:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"batch job {job_id!r} not found")
    return job


def job_list(namespace: Namespace, *, limit: int = 100) -> list[dict[str, Any]]:
    jobs = BatchJob.objects.filter(namespace=namespace).order_by("-created_at")[:limit]
    return [job_describe(j) for j in jobs]


def set_rps(namespace: Namespace, job_id: str, rps: float) -> BatchJob:
    """Change a job's rate; the runner picks it up before its next chunk."""
    rps = _check_rps(rps)
    with transaction.atomic():
        job = job_get(namespace, job_id)
        BatchJob.objects.filter(pk=job.pk).update(rps=rps, updated_at=timezone.now())
    job.refresh_from_db()
    return job


def stop_job(namespace: Namespace, job_id: str, reason: str = "") -> BatchJob:
    """Stop a running job; the runner finishes the item in hand and records no more."""
    job = job_get(namespace, job_id)
    now = timezone.now()
    BatchJob.objects.filter(pk=job.pk, state=BatchState.RUNNING).update(
        state=BatchState.STOPPED, stop_reason=reason, finished_at=now, updated_at=now
    )
    job.refresh_from_db()
    return job


def job_describe(job: BatchJob) -> dict[str, Any]:
    processed = job.done + job.failed
    return {
        "job_id": job.job_id,
        "operation": job.operation,
        "query": job.query,
        "params": job.params,
        "reason": job.reason,
        "created_by": job.created_by,
        "state": job.state,
        "stop_reason": job.stop_reason,
        "rps": job.rps,
        "total": job.total,
        "done": job.done,
        "failed": job.failed,
        "progress": round(processed / job.total, 4) if job.total else 1.0,
        "failures": job.failures,
        "created_at": job.created_at.isoformat(),
        "updated_at": job.updated_at.isoformat(),
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }


# -- one item -------------------------------------------------------------------------------
def apply_to_run(job: BatchJob, run: WorkflowExecution) -> None:
    """Apply the job's operation to one run through the kernel; raise ChronicleError on refusal."""
    ns, wid, run_id = job.namespace, run.workflow_id, str(run.run_id)
    identity = f"batch:{job.job_id}"
    request_id = f"batch:{job.id}:{run_id}"
    if job.operation == BatchOperation.RESET:
        kernel.reset_workflow_execution(
            ns,
            workflow_id=wid,
            run_id=run_id,
            point="first" if job.params["reset_type"] == "FirstWorkflowTask" else "last",
            reason=job.reason,
            reapply_signals=job.params["reapply_signals"],
            request_id=request_id,
            identity=identity,
        )
    elif job.operation == BatchOperation.SIGNAL:
        kernel.signal_workflow_execution(
            ns,
            workflow_id=wid,
            run_id=run_id,
            signal_name=job.params["signal_name"],
            input=job.params["input"],
            request_id=request_id,
            identity=identity,
        )
    elif job.operation == BatchOperation.CANCEL:
        kernel.request_cancel_workflow_execution(
            ns, workflow_id=wid, run_id=run_id, reason=job.reason, identity=identity
        )
    else:
        try:
            kernel.terminate_workflow_execution(
                ns, workflow_id=wid, run_id=run_id, reason=job.reason, identity=identity
            )
        except ChronicleError as exc:
            if exc.code != ErrorCode.WORKFLOW_NOT_RUNNING:
                raise  # already closed: what the operator asked for holds


def record_failure(failures: list[dict[str, Any]], run: WorkflowExecution, error: ChronicleError) -> None:
    if len(failures) < MAX_RECORDED_FAILURES:
        failures.append(
            {
                "workflow_id": run.workflow_id,
                "run_id": str(run.run_id),
                "code": str(error.code),
                "message": error.message,
            }
        )
