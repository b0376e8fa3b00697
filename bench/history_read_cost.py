"""The cost of a full-history read, in process: what a worker that lost a run sends.

An SDK worker whose cache lost a run reads its whole history (``GET .../runs/{run}/history
?after_event_id=0``); a storm of timers due together sends a thousand of them. This drives
the frontend's ASGI application (no server, no sockets) with ``--reads`` such reads over
``--runs`` runs of ``--signals`` signals each, and prints per read: the statements sent,
the trips to the API's pool, this process's CPU and PostgreSQL's (its backends' CPU).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<scratch> python bench/history_read_cost.py \\
        [--reads 500] [--runs 50] [--signals 8] [--rounds 1]

The database must exist; it is migrated first. Copied into an older tree, it measures that
tree's code: alternate the two for a comparison that does not drift with the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

import django

from chronicle.launcher import ensure_secret_key

ensure_secret_key()
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.backends import utils as db_utils  # noqa: E402
from proc_cpu import backend_pids, cpu_by_pid, cpu_used  # noqa: E402

from chronicle import lane_asgi  # noqa: E402
from history import kernel  # noqa: E402
from namespaces.models import Namespace  # noqa: E402
from namespaces.services import api_key_issue, namespace_create  # noqa: E402
from tests.asgi_client import asgi_call  # noqa: E402

COUNTS = {"statements": 0, "trips": 0}


def _count() -> None:
    """Count every statement Django sends (on every thread) and every trip to the pool."""
    for name in ("execute", "executemany"):
        original = getattr(db_utils.CursorWrapper, name)

        def counted(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            COUNTS["statements"] += 1
            return __original(self, *args, **kwargs)

        setattr(db_utils.CursorWrapper, name, counted)
    original_run = lane_asgi.Trips.run

    async def counted_run(self: lane_asgi.Trips, work: Any, *args: Any) -> Any:
        COUNTS["trips"] += 1
        return await original_run(self, work, *args)

    setattr(lane_asgi.Trips, "run", counted_run)  # noqa: B010


def _runs(namespace: Namespace, runs: int, signals: int) -> list[tuple[str, str]]:
    """``runs`` running runs of ``signals`` signals each: (workflow id, run id)."""
    made = []
    for i in range(runs):
        workflow_id = f"hist-{i}-{uuid.uuid4().hex[:8]}"
        start = kernel.StartRequest(workflow_id=workflow_id, workflow_type="T", task_queue="q", input=[i])
        result = kernel.start_workflow_execution(namespace, start)
        for n in range(signals):
            kernel.signal_workflow_execution(
                namespace, workflow_id=workflow_id, run_id=None, signal_name="s", input=[n]
            )
        made.append((workflow_id, str(result.run_id)))
    return made


async def _reads(base: str, authorization: str, runs: list[tuple[str, str]], reads: int) -> None:
    for i in range(reads):
        workflow_id, run_id = runs[i % len(runs)]
        path = f"{base}/workflows/{workflow_id}/runs/{run_id}/history"
        answer = await asgi_call("GET", path, authorization=authorization, query="after_event_id=0")
        if answer.status_code != 200 or not answer.json()["events"]:
            raise RuntimeError(f"{answer.status_code} {answer.content!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--signals", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    namespace = namespace_create(name=f"hist-{uuid.uuid4().hex[:8]}", request_rps=0)
    _, key = api_key_issue(namespace=namespace, name="bench", roles=["client"])
    runs = _runs(namespace, args.runs, args.signals)
    connection.close()
    _count()
    base, authorization = f"/api/v1/namespaces/{namespace.name}", f"Bearer {key}"
    asyncio.run(_reads(base, authorization, runs, 50))  # warm-up: imports, caches, the pool
    backends = backend_pids(os.environ["DATABASE_URL"])
    for _ in range(args.rounds):
        statements, trips = COUNTS["statements"], COUNTS["trips"]
        postgres, cpu = cpu_by_pid(backends), time.process_time()
        asyncio.run(_reads(base, authorization, runs, args.reads))
        cpu = time.process_time() - cpu
        server = cpu_used(postgres, cpu_by_pid(backends))
        per = 1 / args.reads
        print(
            f"reads {args.reads}: {(COUNTS['statements'] - statements) * per:.2f} statements, "
            f"{(COUNTS['trips'] - trips) * per:.2f} trips, {cpu * 1000 * per:.3f} ms CPU (this process), "
            f"{server * 1000 * per:.3f} ms CPU (PostgreSQL) per read"
        )


if __name__ == "__main__":
    main()
