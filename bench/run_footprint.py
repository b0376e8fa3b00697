"""Rows and bytes an open execution keeps in PostgreSQL, and a closed one until retention.

Starts ``--runs`` workflows through the kernel, in process, and brings each to a typical
waiting state: its first workflow task completed, scheduling an activity (then started by
a poll, so it holds a start-to-close timer) and a one-hour user timer. Reports per
execution, for each table whose rows belong to a run: rows, the bytes of those rows
(``pg_column_size``, heap tuples only) and the bytes on disk (``pg_total_relation_size``:
heap, free space, indexes and TOAST, after a plain ``VACUUM``). Then completes every
activity and workflow and reports what a closed run keeps until retention deletes it.

    createdb -h 127.0.0.1 -U postgres <scratch>
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<scratch> python bench/run_footprint.py --runs 2000

Use an empty database: every row of those tables counts as this run's.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")

import django

from chronicle.launcher import ensure_secret_key

ensure_secret_key()  # a key for this run: the settings refuse to start without one

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from history import kernel  # noqa: E402
from history.kernel.tokens import TaskScope  # noqa: E402
from history.models import WorkflowExecution  # noqa: E402
from matching.dispatch import poll_batch  # noqa: E402
from namespaces.models import Namespace  # noqa: E402
from namespaces.services import namespace_create  # noqa: E402

QUEUE = "footprint"
ORDER = {"order_id": "o-000000", "customer": "c-0000", "amount": 12.5, "items": [{"sku": "s-1", "n": 2}]}


def run_tables() -> list[str]:
    """The runs table and every table with a foreign key to it."""
    tables = [WorkflowExecution._meta.db_table]
    for relation in WorkflowExecution._meta.related_objects:
        model = relation.related_model
        assert not isinstance(model, str)
        tables.append(model._meta.db_table)
    return sorted(set(tables))


def start_and_wait(namespace: Namespace, runs: int) -> list[dict[str, Any]]:
    """Start the runs and bring each to waiting on a started activity and a timer; return
    the activity tasks (their tokens close the runs later)."""
    scope = TaskScope(namespace.id, QUEUE)
    for i in range(runs):
        request = kernel.StartRequest(f"fp-{i}", "Order", QUEUE, input=[{**ORDER, "order_id": f"o-{i:06d}"}])
        kernel.start_workflow_execution(namespace, request)
    commands = [
        {
            "command_type": "ScheduleActivityTask",
            "attributes": {
                "activity_id": "charge",
                "activity_type": "Charge",
                "start_to_close_timeout": 300,
                "input": [{"amount": 12.5, "card": "tok_visa"}],
            },
        },
        {"command_type": "StartTimer", "attributes": {"timer_id": "reminder", "start_to_fire_timeout": 3600}},
    ]
    _complete_all(namespace, scope, commands)
    activities: list[dict[str, Any]] = []
    while batch := poll_batch(namespace, QUEUE, "activity", "footprint", max_tasks=32):
        activities.extend(batch)
    return activities


def close_all(namespace: Namespace, activities: list[dict[str, Any]]) -> None:
    scope = TaskScope(namespace.id, QUEUE)
    for task in activities:
        token = task["task_token"]
        kernel.respond_activity_task_completed(scope=scope, task_token=token, result={"ok": True})
    close = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 1}}
    _complete_all(namespace, scope, [close])


def _complete_all(namespace: Namespace, scope: TaskScope, commands: list[dict[str, Any]]) -> None:
    while batch := poll_batch(namespace, QUEUE, "workflow", "footprint", max_tasks=32):
        for task in batch:
            token = task["task_token"]
            kernel.respond_workflow_task_completed(scope=scope, task_token=token, commands=commands)


def footprint(runs: int, title: str) -> None:
    """Print rows, row bytes and bytes on disk per execution, per table."""
    connection.close()  # VACUUM runs outside a transaction, on a fresh session
    with connection.cursor() as cursor:
        cursor.execute("VACUUM")
        rows: list[tuple[str, float, float, float]] = []
        for table in run_tables():
            cursor.execute(
                f"SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0), pg_total_relation_size(%s) "
                f"FROM {table} t",
                [table],
            )
            count, tuple_bytes, disk_bytes = cursor.fetchone()
            rows.append((table, count / runs, tuple_bytes / runs, disk_bytes / runs))
        cursor.execute("SELECT kind, count(*) FROM history_timertask GROUP BY kind ORDER BY kind")
        timers = ", ".join(f"{kind} {n / runs:.2f}" for kind, n in cursor.fetchall())
    print(f"\n{title} ({runs} runs)")
    print(f"{'table':<34}{'rows/run':>10}{'row bytes/run':>15}{'disk bytes/run':>16}")
    for table, count, tuple_bytes, disk_bytes in rows:
        print(f"{table:<34}{count:>10.2f}{tuple_bytes:>15.0f}{disk_bytes:>16.0f}")
    total = (sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows))
    print(f"{'total':<34}{total[0]:>10.2f}{total[1]:>15.0f}{total[2]:>16.0f}")
    print(f"timer rows per run by kind: {timers}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    namespace = namespace_create(name=f"footprint-{uuid.uuid4().hex[:8]}", request_rps=0)
    activities = start_and_wait(namespace, args.runs)
    assert len(activities) == args.runs, len(activities)
    footprint(args.runs, "open: waiting on a started activity and a timer")
    close_all(namespace, activities)
    footprint(args.runs, "closed, kept until retention")


if __name__ == "__main__":
    main()
