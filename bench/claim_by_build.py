"""Time build-aware claims: a new build's pollers behind a backlog pinned to an old build.

Starts ``--old`` runs pinned to build ``old`` (their workflow tasks wait, no ``old``
poller claims them), switches the queue to build ``new``, starts ``--new`` runs, then
times ``poll_once`` for a ``new`` poller taking each of them; then the same number of
claims on an unversioned queue with no backlog, for comparison. Prints p50/p99 per claim.
Run against a scratch database: ``DATABASE_URL=... python bench/claim_by_build.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

import django

from chronicle.launcher import ensure_secret_key

ensure_secret_key()  # a key for this run: the settings refuse to start without one

django.setup()

from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from history.kernel.start import StartRequest, start_workflow_execution  # noqa: E402
from history.kernel.versioning import WorkerVersionStamp  # noqa: E402
from matching.dispatch import poll_once  # noqa: E402
from namespaces.models import Namespace  # noqa: E402
from namespaces.services import build_id_set_current, namespace_create  # noqa: E402


def start_runs(namespace: Namespace, queue: str, count: int) -> None:
    for _ in range(count):
        start_workflow_execution(namespace, StartRequest(f"bench-{uuid.uuid4().hex[:12]}", "T", queue))


def time_claims(
    namespace: Namespace, queue: str, count: int, stamp: WorkerVersionStamp | None
) -> list[float]:
    """Milliseconds per ``poll_once`` that hands out a task; fails if one comes back empty."""
    timings = []
    for _ in range(count):
        started = time.perf_counter()
        task = poll_once(namespace, queue, "workflow", "bench-poller", stamp)
        timings.append((time.perf_counter() - started) * 1000)
        assert task is not None, "a claim found no task"
    return timings


def explain_claim(namespace: Namespace, queue: str, build_id: str) -> str:
    """The claim's candidate scan as PostgreSQL runs it: index, rows read, buffers, time."""
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT id FROM history_task "
            "WHERE namespace_id = %s AND task_queue = %s AND kind = 'workflow' AND build_id = %s "
            "AND visible_at <= %s ORDER BY visible_at, id LIMIT 1",
            [namespace.id, queue, build_id, timezone.now()],
        )
        (document,) = cursor.fetchone()
    plan = document[0]
    scan = plan["Plan"]["Plans"][0] if plan["Plan"].get("Plans") else plan["Plan"]
    return (
        f"{scan['Node Type']} using {scan.get('Index Name')}, rows read {scan['Actual Rows']}, "
        f"shared buffers hit {scan.get('Shared Hit Blocks')}, {plan['Execution Time']:.3f} ms"
    )


def report(label: str, timings: list[float]) -> None:
    ordered = sorted(timings)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(f"{label}: {len(ordered)} claims, p50 {statistics.median(ordered):.2f} ms, p99 {p99:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", type=int, default=2000, help="runs pinned to the old build, left waiting")
    parser.add_argument("--new", type=int, default=300, help="runs on the new build, claimed and timed")
    args = parser.parse_args()
    namespace = namespace_create(name=f"bench-{uuid.uuid4().hex[:10]}")
    versioned, plain = "q-versioned", "q-plain"
    build_id_set_current(namespace=namespace, task_queue=versioned, build_id="old", set_by="bench")
    start_runs(namespace, versioned, args.old)
    build_id_set_current(namespace=namespace, task_queue=versioned, build_id="new", set_by="bench")
    start_runs(namespace, versioned, args.new)
    start_runs(namespace, plain, args.new)
    stamp = WorkerVersionStamp(build_id="new", use_versioning=True)
    scan = explain_claim(namespace, versioned, "new")
    print(f"claim scan for build 'new' behind {args.old} 'old' tasks: {scan}")
    report(
        f"build 'new' behind {args.old} tasks of build 'old'",
        time_claims(namespace, versioned, args.new, stamp),
    )
    report("unversioned queue, no backlog", time_claims(namespace, plain, args.new, None))
    assert poll_once(namespace, versioned, "workflow", "bench-poller", stamp) is None


if __name__ == "__main__":
    main()
