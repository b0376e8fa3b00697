"""Profile the firing of many timers due together, the shard owner's hot path.

Creates runs and user timers through the kernel, makes every timer due, then times
(and optionally cProfiles) ``ShardOwner.fire_due_timers`` and reports CPU and statements
per timer; ``--dispatch`` also polls and completes the resulting workflow tasks, and
``--stream`` runs the daemon's loop over timers due 1 ms apart. Run against a scratch
database: ``DATABASE_URL=... python bench/profile_timers.py --runs 100 --per-run 10 --profile``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from proc_cpu import cpu_by_pid

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

import django

from chronicle.launcher import ensure_secret_key

ensure_secret_key()  # a key for this run: the settings refuse to start without one

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from chronicle.db import DatabaseOutage, listen_conninfo  # noqa: E402
from history.kernel import ExecutionMutation  # noqa: E402
from history.kernel.completions import (  # noqa: E402
    respond_workflow_task_completed,
    respond_workflow_tasks_completed,
)
from history.kernel.locks import lock_run  # noqa: E402
from history.kernel.start import StartRequest, start_workflow_execution  # noqa: E402
from history.kernel.tokens import TaskScope  # noqa: E402
from history.models import TaskKind, TimerKind, TimerTask  # noqa: E402
from history.shard_owner import ShardOwner  # noqa: E402
from matching.dispatch import poll_batch  # noqa: E402
from namespaces.models import Namespace  # noqa: E402
from namespaces.services import namespace_create  # noqa: E402


def create_due_timers(n_runs: int, per_run: int, spread_from: datetime | None = None) -> str:
    """Start ``n_runs`` runs and give each ``per_run`` user timers.

    Without ``spread_from`` every timer is due one second ago; with it, timer k is due
    at ``spread_from`` + k ms (the run_bench timer phase's spread). Returns the namespace.
    """
    namespace = namespace_create(name=f"prof-{uuid.uuid4().hex[:10]}")
    past = timezone.now() - timedelta(seconds=1)
    for i in range(n_runs):
        result = start_workflow_execution(namespace, StartRequest(f"prof-{i}", "T", "q-prof"))
        with transaction.atomic():
            mutation = ExecutionMutation(lock_run(result.run_id), namespace)
            for k in range(per_run):
                offset = timedelta(milliseconds=i * per_run + k)
                due = past if spread_from is None else spread_from + offset
                mutation.add_timer(TimerKind.USER_TIMER, due, timer_id=f"t{k}", scheduled_event_id=k + 1)
            mutation.save()
    return namespace.name


IDENTITY = "profile"
CLOSE = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": "done"}}


def dispatch_all(namespace_name: str, max_tasks: int, close: bool = False, profile: bool = False) -> None:
    """Poll and complete, in process, every workflow task the firing made; print the cost of one.

    This is the frontend's share of a timer's workflow task without HTTP, the event loop
    or thread hand-offs: what is left of run_bench's CPU per timer task is those. With
    ``close``, each task closes its run and a burst's completions go in one report batch,
    as the SDK's worker sends them when a sleep storm wakes its runs.
    """
    namespace = Namespace.objects.get(name=namespace_name)
    scope = TaskScope(namespace.id, "q-prof")
    statements = [0]

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements[0] += 1
        return execute(sql, params, many, context)

    profiler = cProfile.Profile() if profile else None
    tasks, poll_cpu, complete_cpu = 0, 0.0, 0.0
    with connection.execute_wrapper(count):
        while True:
            cpu0 = time.process_time()
            burst = poll_batch(namespace, "q-prof", TaskKind.WORKFLOW, "profile", max_tasks=max_tasks)
            cpu1 = time.process_time()
            if not burst:
                break
            if profiler:
                profiler.enable()
            if close:
                calls = [
                    {"scope": scope, "task_token": t["task_token"], "commands": [CLOSE], "identity": IDENTITY}
                    for t in burst
                ]
                respond_workflow_tasks_completed(calls)
            else:
                for task in burst:
                    respond_workflow_task_completed(
                        scope=scope, task_token=task["task_token"], commands=[], identity=IDENTITY
                    )
            if profiler:
                profiler.disable()
            complete_cpu += time.process_time() - cpu1
            poll_cpu += cpu1 - cpu0
            tasks += len(burst)
    per = 1000 / max(1, tasks)
    print(
        f"dispatch: {tasks} workflow tasks; per task {poll_cpu * per:.2f} ms CPU to poll, "
        f"{complete_cpu * per:.2f} ms to complete, {statements[0] / max(1, tasks):.1f} statements"
    )
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


def stream(owner: ShardOwner, runs: int, per_run: int) -> None:
    """Run the daemon's own loop over timers due one per millisecond; print its cost per timer.

    CPU per timer here depends on how many firing transactions the loop needs (the
    fixed cost of each), which is what the shard owner's pacing decides.
    """
    create_due_timers(runs, per_run, spread_from=timezone.now() + timedelta(seconds=10))
    total = TimerTask.objects.filter(kind=TimerKind.USER_TIMER).count()
    first_due = TimerTask.objects.order_by("fire_at").values_list("fire_at", flat=True).first()
    if first_due is None or first_due < timezone.now():
        print("stream: setup overran the first due time; the figures would not show the pacing")
    passes, statements = [0], [0]
    fire = owner.fire_due_timers

    def counted_fire() -> bool:
        passes[0] += 1
        return fire()

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements[0] += 1
        return execute(sql, params, many, context)

    def serve() -> None:
        with connection.execute_wrapper(count):
            owner.serve(listen_conninfo(), DatabaseOutage("profile"))
        connection.close()

    owner.fire_due_timers = counted_fire  # type: ignore[method-assign]
    thread = threading.Thread(target=serve)
    cpu0, started = time.process_time(), time.perf_counter()
    thread.start()
    while TimerTask.objects.filter(kind=TimerKind.USER_TIMER).exists():
        time.sleep(0.005)
    owner.stopping = True
    thread.join()
    cpu, seconds = time.process_time() - cpu0, time.perf_counter() - started
    print(
        f"stream: {total} timers due 1 ms apart fired in {seconds:.2f} s with {passes[0]} firing passes, "
        f"{statements[0]} statements; {cpu * 1000 / total:.2f} ms Python CPU per timer "
        "(the waiting loop included)"
    )


@dataclass
class FiringCost:
    """What firing one batch of due timers cost: wall time, CPU on both sides, statements."""

    seconds: float
    python_cpu: float
    postgres_cpu: float
    statements: int


def backend_cpu_seconds(pid: int) -> float:
    """User + system CPU of this connection's PostgreSQL backend (same host), from /proc."""
    return cpu_by_pid({pid}).get(pid, 0.0)


def fire_all(owner: ShardOwner) -> FiringCost:
    """Fire every due timer the owner's shards hold and measure what it cost."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = int(cursor.fetchone()[0])
    statements = [0]

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements[0] += 1
        return execute(sql, params, many, context)

    pg0, cpu0, started = backend_cpu_seconds(backend), time.process_time(), time.perf_counter()
    with connection.execute_wrapper(count):
        owner.fire_due_timers()
    return FiringCost(
        seconds=time.perf_counter() - started,
        python_cpu=time.process_time() - cpu0,
        postgres_cpu=backend_cpu_seconds(backend) - pg0,
        statements=statements[0],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--per-run", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="cumulative", help="pstats sort key, e.g. tottime")
    parser.add_argument("--rounds", type=int, default=2, help="later rounds reuse warm connections")
    parser.add_argument("--dispatch", action="store_true", help="then poll and complete the tasks")
    parser.add_argument("--max-tasks", type=int, default=1, help="tasks per poll when dispatching (up to 32)")
    parser.add_argument("--stream", action="store_true", help="timers due 1 ms apart, the daemon's loop")
    parser.add_argument(
        "--close", action="store_true", help="dispatching: each task closes its run, a burst reported at once"
    )
    parser.add_argument("--profile-dispatch", action="store_true", help="cProfile the completions")
    args = parser.parse_args()
    TimerTask.objects.all().delete()
    owner = ShardOwner("profile")
    owner.ensure_shards()
    owner.rebalance()
    if args.stream:
        stream(owner, args.runs, args.per_run)
        owner.shutdown()
        return
    for round_number in range(1, args.rounds + 1):
        namespace_name = create_due_timers(args.runs, args.per_run)
        owner.refresh_next_fire()
        total = TimerTask.objects.filter(kind=TimerKind.USER_TIMER).count()
        profiler = cProfile.Profile() if args.profile and round_number == args.rounds else None
        if profiler:
            profiler.enable()
        cost = fire_all(owner)
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(30)
        fired = total - TimerTask.objects.filter(kind=TimerKind.USER_TIMER).count()
        per = 1000 / max(1, fired)
        print(
            f"round {round_number}: fired {fired}/{total} timers in {cost.seconds * 1000:.0f} ms "
            f"({fired / cost.seconds:.0f}/s); per timer: {cost.python_cpu * per:.2f} ms Python CPU, "
            f"{cost.postgres_cpu * per:.2f} ms PostgreSQL CPU, "
            f"{cost.statements / max(1, fired):.3f} statements"
        )
        if args.dispatch:
            last = round_number == args.rounds
            dispatch_all(namespace_name, args.max_tasks, args.close, args.profile_dispatch and last)
    owner.shutdown()


if __name__ == "__main__":
    main()
