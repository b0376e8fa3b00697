"""Measure continue-as-new hops and cron-time computation through the kernel (no HTTP).

Each hop takes the run's workflow task as matching does, completes it with one
``ContinueAsNewWorkflowExecution`` and so closes the run and creates the next, the
way a long-lived workflow rolls its history over. The namespace's minimal interval
is 0, so hops are not spaced a second apart. Run against a scratch database:
``DATABASE_URL=... python bench/continue_as_new_chain.py --hops 500``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

import django

from chronicle.launcher import ensure_secret_key

ensure_secret_key()  # a key for this run: the settings refuse to start without one

django.setup()

from history import kernel  # noqa: E402
from history.cron import next_cron_time  # noqa: E402
from matching.dispatch import poll_once  # noqa: E402
from namespaces.services import namespace_create  # noqa: E402

CAN = {"command_type": "ContinueAsNewWorkflowExecution", "attributes": {"input": [{"data": 1}]}}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure_hops(hops: int) -> list[float]:
    """Seconds per hop: poll the new run's task, complete it with continue-as-new."""
    namespace = namespace_create(name=f"can-{uuid.uuid4().hex[:10]}", workflow_id_reuse_minimal_interval=0)
    queue = "q-can"
    kernel.start_workflow_execution(namespace, kernel.StartRequest("chain", "Chain", queue))
    durations = []
    for _ in range(hops):
        started = time.perf_counter()
        task = poll_once(namespace, queue, "workflow", "bench")
        assert task is not None, "the next run's workflow task was not visible"
        kernel.respond_workflow_task_completed(
            scope=kernel.TaskScope(namespace.id, queue), task_token=task["task_token"], commands=[CAN]
        )
        durations.append(time.perf_counter() - started)
    return durations


def measure_cron(expressions: list[str], rounds: int) -> float:
    """Microseconds per ``next_cron_time`` call, parse included."""
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    started = time.perf_counter()
    for i in range(rounds):
        next_cron_time(expressions[i % len(expressions)], moment + timedelta(minutes=i))
    return (time.perf_counter() - started) / rounds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hops", type=int, default=500)
    parser.add_argument("--cron-rounds", type=int, default=20_000)
    args = parser.parse_args()
    durations = measure_hops(args.hops)
    total = sum(durations)
    print(f"continue-as-new hops: {args.hops} in {total:.2f} s = {args.hops / total:.0f} hops/s")
    print(
        f"per hop (poll + complete): p50 {percentile(durations, 50) * 1000:.1f} ms, "
        f"p99 {percentile(durations, 99) * 1000:.1f} ms"
    )
    expressions = ["* * * * *", "*/15 9-17 * * MON-FRI", "0 0 1 * *", "CRON_TZ=Europe/Paris 30 2 * * *"]
    print(
        f"next_cron_time: {measure_cron(expressions, args.cron_rounds):.1f} µs per call (mixed expressions)"
    )


if __name__ == "__main__":
    main()
