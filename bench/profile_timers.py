"""Profile the firing of many timers due together, the shard owner's hot path.

Creates runs and user timers through the kernel, makes every timer due, then times
(and optionally cProfiles) ``ShardOwner.fire_due_timers``. Run against a scratch
database: ``DATABASE_URL=... python bench/profile_timers.py --timers 1000 --profile``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from history.kernel._mutation import ExecutionMutation, lock_run  # noqa: E402
from history.kernel.executions import StartRequest, start_workflow_execution  # noqa: E402
from history.models import TimerKind, TimerTask  # noqa: E402
from history.shard_owner import ShardOwner  # noqa: E402
from namespaces.services import namespace_create  # noqa: E402


def create_due_timers(n_runs: int, per_run: int) -> None:
    """Start ``n_runs`` runs and give each ``per_run`` user timers due one second ago."""
    namespace = namespace_create(name=f"prof-{uuid.uuid4().hex[:10]}")
    due = timezone.now() - timedelta(seconds=1)
    for i in range(n_runs):
        result = start_workflow_execution(namespace, StartRequest(f"prof-{i}", "T", "q-prof"))
        with transaction.atomic():
            mutation = ExecutionMutation(lock_run(result.run_id), namespace)
            for k in range(per_run):
                mutation.add_timer(TimerKind.USER_TIMER, due, timer_id=f"t{k}", scheduled_event_id=k + 1)
            mutation.save()


@dataclass
class FiringCost:
    """What one ``fire_due_timers`` call cost: wall seconds, process CPU seconds, statements."""

    seconds: float
    cpu_seconds: float
    statements: int


def fire_all(owner: ShardOwner) -> FiringCost:
    """Fire every due timer the owner's shards hold, counting the SQL statements it sends.

    Process CPU is load-insensitive where wall time on a shared machine is not.
    """
    statements = 0

    def count(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        nonlocal statements
        statements += 1
        return execute(sql, params, many, context)

    started, cpu_started = time.perf_counter(), time.process_time()
    with connection.execute_wrapper(count):
        owner.fire_due_timers()
    return FiringCost(time.perf_counter() - started, time.process_time() - cpu_started, statements)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--per-run", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="cumulative", help="pstats sort key, e.g. tottime")
    parser.add_argument("--rounds", type=int, default=2, help="later rounds reuse warm connections")
    args = parser.parse_args()
    TimerTask.objects.all().delete()
    owner = ShardOwner("profile")
    owner.ensure_shards()
    owner.rebalance()
    for round_number in range(1, args.rounds + 1):
        create_due_timers(args.runs, args.per_run)
        owner.refresh_next_fire()
        total = TimerTask.objects.filter(kind=TimerKind.USER_TIMER).count()
        profiler = cProfile.Profile() if args.profile and round_number == args.rounds else None
        if profiler:
            profiler.enable()
        cost = fire_all(owner)
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(30)
        left = TimerTask.objects.filter(kind=TimerKind.USER_TIMER).count()
        print(
            f"round {round_number}: fired {total - left}/{total} timers "
            f"in {cost.seconds * 1000:.0f} ms ({total / cost.seconds:.0f}/s), "
            f"{cost.cpu_seconds * 1000 / max(1, total):.2f} ms CPU and "
            f"{cost.statements / max(1, total):.3f} statements per timer ({cost.statements} in all)"
        )
    owner.shutdown()


if __name__ == "__main__":
    main()
