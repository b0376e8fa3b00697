"""Operator UI page latency over 100,000 runs: the executions list (first and a deep
keyset page, a status filter, a sort by close time), one execution's page, and the
status counts the list shows.

Loads the same scratch data as ``bench_visibility.py`` (bulk-inserted runs, not kernel
writes), signs a viewer in, then renders each page in-process through Django's test
client (routing, role check, queries, template) and prints p50/p99 per page.

A second run with 5,000 events (workflow tasks each scheduling an activity, the
activity completing, written through the kernel) measures the execution page, its
reset page (every eligible point summarised) and a reset preview on a long history.

Usage: python bench/bench_ui.py [--database-url URL] [--runs 100000] [--repeat 50]
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
    args = parser.parse_args()

    name = f"chronicle_uibench_{secrets.token_hex(4)}"
    admin(args.database_url, f"CREATE DATABASE {name}")
    os.environ["DATABASE_URL"] = with_database(args.database_url, name)
    os.environ["CHRONICLE_DB_POOL"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")
    try:
        run(args.runs, args.repeat)
    finally:
        from django.db import connections

        connections.close_all()
        admin(args.database_url, f"DROP DATABASE {name}")


def run(runs: int, repeat: int) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from visibility_data import bulk_insert_runs

    from executions import visibility
    from history import kernel
    from history.models import WorkflowExecution
    from namespaces.models import MemberRole, Membership
    from namespaces.services import namespace_create

    call_command("migrate", verbosity=0)
    namespace = namespace_create(name="uibench")
    bulk_insert_runs(namespace, runs)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {WorkflowExecution._meta.db_table}")
    start = kernel.StartRequest(workflow_id="ui-bench-run", workflow_type="Bench", task_queue="bench")
    real = WorkflowExecution.objects.get(run_id=kernel.start_workflow_execution(namespace, start).run_id)
    user = get_user_model().objects.create_user("ui-bench")
    Membership.objects.create(user=user, namespace=namespace, role=MemberRole.VIEWER)
    client = Client()
    client.force_login(user)

    long_run = long_history_run(namespace, events=5_000)
    long_url = f"/ns/uibench/workflows/{long_run.workflow_id}/runs/{long_run.run_id}/"
    Membership.objects.filter(user=user).update(role=MemberRole.OPERATOR)  # the reset page needs it

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
        ("execution page", page(f"/ns/uibench/workflows/{real.workflow_id}/runs/{real.run_id}/")),
        ("execution page, 5,000 events", page(long_url)),
        ("reset page, 5,000 events", page(long_url + "reset/")),
        ("reset preview, 5,000 events", page(long_url + "reset/?point=first")),
        ("(inside the list: status counts)", lambda: len(visibility.count_by_status(namespace, "")) and 200),
    ]
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


def long_history_run(namespace: Any, *, events: int) -> Any:
    """A running run with about ``events`` events, written through the kernel as a worker would.

    Each round is a workflow task that schedules an activity and the activity completing
    (six events), so the history has many reset points and activities to summarise.
    """
    from history import kernel
    from history.models import WorkflowExecution
    from matching.dispatch import poll_once

    request = kernel.StartRequest(workflow_id="ui-bench-long", workflow_type="Bench", task_queue="long")
    run_id = kernel.start_workflow_execution(namespace, request).run_id
    for n in range(events // 6):
        task = poll_once(namespace, "long", "workflow", "bench")
        assert task is not None
        command = {
            "command_type": "ScheduleActivityTask",
            "attributes": {"activity_id": f"a{n}", "activity_type": "Step", "start_to_close_timeout": 60},
        }
        kernel.respond_workflow_task_completed(task_token=task["task_token"], commands=[command])
        activity = poll_once(namespace, "long", "activity", "bench")
        assert activity is not None
        kernel.respond_activity_task_completed(task_token=activity["task_token"], result=[{"n": n}])
    return WorkflowExecution.objects.get(run_id=run_id)


if __name__ == "__main__":
    main()
