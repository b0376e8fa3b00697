"""Operator UI page latency over 100,000 runs: the executions list (first and a deep
keyset page, a status filter, a sort by close time, the Stuck view), one execution's
page, the execution page of a 5,000-event run with its timeline, the status counts the
list shows, the failure triage page, and the CSV export of every run (time and peak
Python memory).

Loads the same scratch data as ``bench_visibility.py`` (bulk-inserted runs, not kernel
writes), drives one run through the kernel in process to about 5,000 events (activities
completed, failed and retried, timers fired, signals), signs an operator in, then renders
each page in-process through Django's test client (routing, role check, queries,
template) and prints p50/p99 per page.

The long run is also where its reset page (every eligible point summarised) and a reset
preview are measured.

Usage: python bench/bench_ui.py [--database-url URL] [--runs 100000] [--repeat 50] [--events 5000]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import time
from collections.abc import Callable
from typing import Any

from bench_visibility import admin, pct, with_database  # beside this script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--events", type=int, default=5000, help="history length of the long run")
    args = parser.parse_args()

    name = f"chronicle_uibench_{secrets.token_hex(4)}"
    admin(args.database_url, f"CREATE DATABASE {name}")
    os.environ["DATABASE_URL"] = with_database(args.database_url, name)
    os.environ["CHRONICLE_DB_POOL"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")
    from chronicle.launcher import ensure_secret_key

    ensure_secret_key()  # a key for this run: the settings refuse to start without one
    try:
        run(args.runs, args.repeat, args.events)
    finally:
        from django.db import connections

        connections.close_all()
        admin(args.database_url, f"DROP DATABASE {name}")


def long_run(namespace: Any, events: int) -> Any:
    """A run driven through the kernel to about ``events`` events.

    Each round one workflow task schedules 40 activities and a timer; the activities then
    run on "workers" in process: one in four fails its first attempt and is retried after
    its backoff, one in twenty fails for good, the rest complete; the timer fires and a
    signal arrives. Timers fire through ``fire_timers`` as the shard owner would fire them.
    """
    from history import kernel
    from history.kernel.timers import ShardFence, fire_timers
    from history.models import Shard, TimerKind, TimerTask, WorkflowExecution
    from matching.dispatch import poll_once

    start = kernel.StartRequest(workflow_id="ui-bench-long", workflow_type="Bench", task_queue="long")
    run = WorkflowExecution.objects.get(run_id=kernel.start_workflow_execution(namespace, start).run_id)
    shard, _ = Shard.objects.get_or_create(shard_id=run.shard_id, defaults={"range_id": 1})
    fence = ShardFence(shard.shard_id, shard.range_id)

    def fire(kind: str) -> None:
        rows = [(t.id, str(run.run_id)) for t in TimerTask.objects.filter(run=run, kind=kind)]
        if rows:
            fire_timers(fence, rows)

    def activity(n: int) -> dict[str, Any]:
        policy = {"initial_interval": 1, "maximum_attempts": 1 if n % 20 == 0 else 3}
        attributes = {"activity_id": f"a{n}", "activity_type": f"Step{n % 7}", "start_to_close_timeout": 60}
        return {"command_type": "ScheduleActivityTask", "attributes": {**attributes, "retry_policy": policy}}

    n = 0
    while WorkflowExecution.objects.get(run_id=run.run_id).next_event_id < events:
        task = poll_once(namespace, "long", "workflow", "bench")
        assert task is not None
        timer = {"timer_id": f"t{n}", "start_to_fire_timeout": 5}
        commands = [activity(n + i) for i in range(40)] + [
            {"command_type": "StartTimer", "attributes": timer}
        ]
        kernel.respond_workflow_task_completed(
            scope=kernel.TaskScope(namespace.id, "long"), task_token=task["task_token"], commands=commands
        )
        for i in range(40):
            claimed = poll_once(namespace, "long", "activity", "bench")
            assert claimed is not None
            if (n + i) % 4 == 0:
                kernel.respond_activity_task_failed(
                    scope=kernel.TaskScope(namespace.id, "long"),
                    task_token=claimed["task_token"],
                    failure={"message": "flaky"},
                )
            else:
                kernel.respond_activity_task_completed(
                    scope=kernel.TaskScope(namespace.id, "long"),
                    task_token=claimed["task_token"],
                    result={"i": i},
                )
        fire(TimerKind.ACTIVITY_RETRY)
        while (retry := poll_once(namespace, "long", "activity", "bench")) is not None:
            kernel.respond_activity_task_completed(
                scope=kernel.TaskScope(namespace.id, "long"), task_token=retry["task_token"], result="retried"
            )
        fire(TimerKind.USER_TIMER)
        kernel.signal_workflow_execution(
            namespace, workflow_id=run.workflow_id, run_id=None, signal_name="tick", input=[n]
        )
        n += 40
    return WorkflowExecution.objects.get(run_id=run.run_id)


def run(runs: int, repeat: int, events: int) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.template.loader import render_to_string
    from django.test import Client
    from visibility_data import bulk_insert_runs

    from executions import visibility
    from executions.ui import timeline
    from history import kernel
    from history.models import WorkflowExecution
    from namespaces.models import MemberRole, Membership
    from namespaces.services import namespace_create

    call_command("migrate", verbosity=0)
    namespace = namespace_create(name="uibench")
    bulk_insert_runs(namespace, runs)
    with connection.cursor() as cursor:
        # Five failure messages (with ids and numbers that triage masks) over the failed runs.
        cursor.execute(
            f"UPDATE {WorkflowExecution._meta.db_table} SET failure = jsonb_build_object('message', "
            "(ARRAY['card ', 'timeout after ', 'ledger row ', 'quota ', 'order-'])"
            "[1 + abs(hashtext(workflow_id)) % 5]"
            " || (abs(hashtext(workflow_id)) % 1000) || ' failed') WHERE status = 'Failed'"
        )
        cursor.execute(f"VACUUM ANALYZE {WorkflowExecution._meta.db_table}")
    start = kernel.StartRequest(workflow_id="ui-bench-run", workflow_type="Bench", task_queue="bench")
    real = WorkflowExecution.objects.get(run_id=kernel.start_workflow_execution(namespace, start).run_id)
    long = long_run(namespace, events)
    long_url = f"/ns/uibench/workflows/{long.workflow_id}/runs/{long.run_id}/"
    user = get_user_model().objects.create_user("ui-bench")
    # An operator: the reset page needs the role; reading pages is the same for every role.
    Membership.objects.create(user=user, namespace=namespace, role=MemberRole.OPERATOR)
    client = Client()
    client.force_login(user)

    deep = "/ns/uibench/"
    for _ in range(50):  # follow "Next page" 50 times: page 51
        link = re.search(r'href="\?([^"]+)" rel="next"', client.get(deep).content.decode())
        assert link is not None
        deep = "/ns/uibench/?" + link.group(1).replace("&amp;", "&")

    def page(url: str) -> Callable[[], int]:
        return lambda: client.get(url).status_code

    cases = [
        ("list, newest first (page 1)", page("/ns/uibench/")),
        ("list, page 51 (keyset)", page(deep)),
        ("list, status = Failed", page("/ns/uibench/?status=Failed")),
        ("list, sorted by close time", page("/ns/uibench/?sort=CloseTime&dir=desc")),
        ("list, Stuck view", page("/ns/uibench/?view=stuck")),
        ("execution page", page(f"/ns/uibench/workflows/{real.workflow_id}/runs/{real.run_id}/")),
        ("failure triage, 24 h", page("/ns/uibench/triage/?window=24h")),
        ("failure triage, 7 d", page("/ns/uibench/triage/?window=7d")),
        (f"execution page, {long.next_event_id - 1:,} events", page(long_url)),
        ("(inside it: the timeline)", lambda: timeline_only(long)),
        ("reset page, long run", page(long_url + "reset/")),
        ("reset preview, long run", page(long_url + "reset/?point=first")),
        ("(inside the list: status counts)", lambda: len(visibility.count_by_status(namespace, "")) and 200),
    ]

    def timeline_only(ex: WorkflowExecution) -> int:
        drawn = timeline.build(ex, [], namespace="uibench", shown=(1, 50), page_size=50)
        render_to_string("ui/_timeline.html", {"timeline": drawn, "ex": ex})
        return 200

    print(f"{runs:,} runs in the namespace; {repeat} renders per page\n")
    print(f"{'page':<32} {'p50 ms':>8} {'p99 ms':>8}")
    for label, action in cases:
        assert action() == 200
        samples = []
        for _ in range(repeat):
            begin = time.perf_counter()
            action()
            samples.append((time.perf_counter() - begin) * 1000)
        print(f"{label:<32} {pct(samples, 50):>8.2f} {pct(samples, 99):>8.2f}")
    export_all(namespace)


def export_all(namespace: object) -> None:
    """Walk the whole CSV export once, keeping only the byte count: time and peak memory."""
    import tracemalloc

    from executions.ui.lists import export_pages

    tracemalloc.start()
    begin, size, lines = time.perf_counter(), 0, 0
    for chunk in export_pages(namespace, "ORDER BY StartTime DESC"):  # type: ignore[arg-type]
        size, lines = size + len(chunk), lines + chunk.count("\n")
    elapsed = time.perf_counter() - begin
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"\nCSV export: {lines - 1:,} rows, {size / 1e6:.1f} MB in {elapsed:.1f} s;"
        f" peak Python memory {peak / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
