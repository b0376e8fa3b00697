"""The batch-job runner behind ``manage.py run_batch_jobs``.

Any number of runners may run. Each claims one running job whose lease is free or
expired (``FOR UPDATE SKIP LOCKED``), works through its runs in run-id order at the
job's rate, and after every chunk (at most about a second of work) records the counts, the
failures and the last run id in one UPDATE that also renews its lease. That UPDATE is
guarded by the lease owner, so a runner that lost its lease records nothing; a
successor resumes after the last recorded run. The runs of the chunk in hand when a
runner dies are applied again, which changes nothing (see :mod:`executions.batch`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta
from types import FrameType
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from chronicle import health
from chronicle.db import DatabaseOutage
from chronicle.errors import ChronicleError
from executions.batch import apply_to_run, job_runs, record_failure
from executions.models import BatchJob, BatchState
from history.models import WorkflowExecution

log = logging.getLogger("chronicle.batch")

MAX_CHUNK = 200


@dataclass
class ChunkResult:
    done: int = 0
    failed: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    last_run: WorkflowExecution | None = None


class BatchRunner:
    def __init__(
        self,
        owner: str | None = None,
        *,
        lease_seconds: float = 30.0,
        poll_interval: float = 1.0,
        chunk_seconds: float = 1.0,
    ) -> None:
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.lease = timedelta(seconds=lease_seconds)
        self.poll_interval = poll_interval
        self.chunk_seconds = chunk_seconds
        self.stopping = False
        self._next_at = time.monotonic()

    def run(self) -> None:
        """Claim and run jobs until SIGTERM or SIGINT."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.stopping = True

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        log.info("batch runner %s started", self.owner)
        outage = DatabaseOutage(f"batch runner {self.owner}")
        while not self.stopping:
            try:
                self.run_one()
            except DatabaseError as error:
                # The lease on the job in hand expires; this runner or another resumes it.
                outage.lost(error)
            else:
                outage.recovered()
                health.beat("batch-runner")

    def run_one(self) -> None:
        """Claim a job and work it to its end or to shutdown; sleep when there is none."""
        job = self.claim()
        if job is None:
            time.sleep(self.poll_interval)
            return
        try:
            self.process(job)
        except ChronicleError as exc:
            # The job itself cannot go on (its query no longer reads): fail it, not the runner.
            log.error("batch job %s failed: %s", job.job_id, exc.message)
            self._finish(job, BatchState.FAILED, reason=exc.message)
        finally:
            self.release(job)

    def claim(self) -> BatchJob | None:
        now = timezone.now()
        with transaction.atomic():
            job = (
                BatchJob.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("namespace")
                .filter(state=BatchState.RUNNING)
                .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
                .order_by("created_at")
                .first()
            )
            if job is None:
                return None
            job.lease_owner, job.lease_expires_at = self.owner, now + self.lease
            job.save(update_fields=["lease_owner", "lease_expires_at"])
        log.info("batch runner %s took job %s (%s)", self.owner, job.job_id, job.operation)
        return job

    def process(self, job: BatchJob) -> None:
        """Run the job's remaining runs chunk by chunk until done, stopped or the lease is lost."""
        current: BatchJob | None = job
        while current is not None and not self.stopping:
            runs = job_runs(current).only("run_id", "workflow_id").order_by("run_id")
            if current.last_run_id is not None:
                runs = runs.filter(run_id__gt=current.last_run_id)
            chunk = list(runs[: max(1, min(MAX_CHUNK, int(current.rps * self.chunk_seconds)))])
            if not chunk:
                self._finish(current)
                return
            current = self._record(current, self._run_chunk(current, chunk))

    def _run_chunk(self, job: BatchJob, chunk: list[WorkflowExecution]) -> ChunkResult:
        result = ChunkResult(failures=list(job.failures))
        started = time.monotonic()
        for run in chunk:
            self._pace(job.rps)
            try:
                apply_to_run(job, run)
                result.done += 1
            except ChronicleError as exc:
                result.failed += 1
                record_failure(result.failures, run, exc)
            result.last_run = run
            if self.stopping or time.monotonic() - started >= self.chunk_seconds:
                break  # progress is recorded about once per chunk_seconds
        return result

    def _pace(self, rps: float) -> None:
        """Hold the job's rate: one item every 1/rps seconds, without catching up after a pause."""
        now = time.monotonic()
        if self._next_at > now:
            time.sleep(self._next_at - now)
        self._next_at = max(self._next_at, now) + 1.0 / rps

    def _record(self, job: BatchJob, result: ChunkResult) -> BatchJob | None:
        """Write the chunk's progress and renew the lease; None when the job is no longer ours to run."""
        assert result.last_run is not None
        health.beat("batch-runner")  # a long job beats from each chunk it records
        now = timezone.now()
        written = BatchJob.objects.filter(pk=job.pk, lease_owner=self.owner).update(
            done=job.done + result.done,
            failed=job.failed + result.failed,
            failures=result.failures,
            last_run_id=result.last_run.run_id,
            lease_expires_at=now + self.lease,
            updated_at=now,
        )
        if not written:
            log.warning("batch runner %s lost the lease on job %s", self.owner, job.job_id)
            return None
        job.refresh_from_db()
        return job if job.state == BatchState.RUNNING else None

    def _finish(self, job: BatchJob, state: str = BatchState.COMPLETED, *, reason: str = "") -> None:
        now = timezone.now()
        BatchJob.objects.filter(pk=job.pk, lease_owner=self.owner, state=BatchState.RUNNING).update(
            state=state, stop_reason=reason, finished_at=now, updated_at=now
        )
        log.info("batch job %s %s: %d done, %d failed", job.job_id, state, job.done, job.failed)

    def release(self, job: BatchJob) -> None:
        BatchJob.objects.filter(pk=job.pk, lease_owner=self.owner).update(
            lease_owner="", lease_expires_at=None
        )
