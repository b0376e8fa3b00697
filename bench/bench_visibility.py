"""Visibility query latency over 100,000 runs, against a primary-key lookup.

Creates a scratch database, migrates it, registers CustomerId (Keyword), Amount (Int)
and Due (Datetime), bulk-loads runs with one SQL statement per batch (test data, not
kernel writes: see ``bench/visibility_data.py``), VACUUM ANALYZEs, then times
each typical query in-process through ``executions.visibility`` (one page of 100 rows,
as the REST list reads it) and prints p50/p99 and each query's plan. Drops the database
at the end unless ``--keep``.

Usage: python bench/bench_visibility.py [--database-url URL] [--runs 100000] [--repeat 200]
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PAGE = 100


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100.0 * (len(ordered) - 1))))]


def with_database(url: str, name: str) -> str:
    return urlunparse(urlparse(url)._replace(path=f"/{name}"))


def admin(url: str, sql: str) -> None:
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(sql)


def plan_summary(sql: str) -> str:
    """The plan's node types and index names, e.g. ``Limit > Index Scan(exec_ns_status)``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
        (document,) = cursor.fetchone()

    def walk(node: dict[str, Any]) -> Iterator[str]:
        label = node["Node Type"]
        if "Index Name" in node:
            label += f"({node['Index Name']})"
        yield label
        for child in node.get("Plans", []):
            yield from walk(child)

    return " > ".join(walk(document[0]["Plan"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()

    name = f"chronicle_visbench_{secrets.token_hex(4)}"
    admin(args.database_url, f"CREATE DATABASE {name}")
    os.environ["DATABASE_URL"] = with_database(args.database_url, name)
    os.environ["CHRONICLE_DB_POOL"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")
    from chronicle.launcher import ensure_secret_key

    ensure_secret_key()  # a key for this run: the settings refuse to start without one
    try:
        run(args.runs, args.repeat)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            admin(args.database_url, f"DROP DATABASE {name}")
        else:
            print(f"kept database {name}", file=sys.stderr)


def run(runs: int, repeat: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from visibility_data import bulk_insert_runs  # beside this script

    from executions import search_attributes, visibility
    from history.models import WorkflowExecution
    from namespaces.services import namespace_create

    call_command("migrate", verbosity=0)
    namespace = namespace_create(name="visbench")
    for attribute, kind in (("CustomerId", "Keyword"), ("Amount", "Int"), ("Due", "Datetime")):
        search_attributes.add_attribute(namespace, attribute, kind)
    started = time.perf_counter()
    bulk_insert_runs(namespace, runs)
    noise = namespace_create(name="visbench-other")  # another tenant's rows in the same table
    bulk_insert_runs(noise, runs // 4)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {WorkflowExecution._meta.db_table}")
    print(
        f"loaded {runs:,} runs (+{runs // 4:,} in another namespace) in {time.perf_counter() - started:.1f}s"
    )

    some_run = WorkflowExecution.objects.filter(namespace=namespace).values_list("run_id", flat=True)[
        runs // 2
    ]
    token = ""
    for _ in range(50):
        _, token = visibility.page(namespace, "", page_size=PAGE, next_page_token=token)  # type: ignore[assignment]

    def listing(query: str, page_token: str = "") -> Callable[[], int]:
        return lambda: len(visibility.page(namespace, query, page_size=PAGE, next_page_token=page_token)[0])

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("reference: primary-key lookup", lambda: WorkflowExecution.objects.get(pk=some_run) and 1),
        ("list, newest first (page 1)", listing("")),
        ("list, newest first (page 51, keyset)", listing("", token or "")),
        ("ExecutionStatus = 'Running'", listing("ExecutionStatus = 'Running'")),
        ("WorkflowType = 'Refund'", listing("WorkflowType = 'Refund'")),
        ("CustomerId = 'c-42' (Keyword)", listing("CustomerId = 'c-42'")),
        ("Amount > 9900 (Int)", listing("Amount > 9900")),
        (
            "Due BETWEEN one day (Datetime)",
            listing("Due BETWEEN '2026-01-10T00:00:00Z' AND '2026-01-11T00:00:00Z'"),
        ),
        ("ORDER BY Amount DESC", listing("ORDER BY Amount DESC")),
        (
            "WorkflowType AND (IN OR range)",
            listing("WorkflowType = 'Order' AND (CustomerId IN ('c-4', 'c-8') OR Amount > 9990)"),
        ),
        (
            "count ExecutionStatus = 'Failed'",
            lambda: visibility.count(namespace, "ExecutionStatus = 'Failed'"),
        ),
        ("count GROUP BY ExecutionStatus", lambda: visibility.count_by_status(namespace, "")),
    ]
    results: list[tuple[str, float, float, Any, str]] = []
    for label, action in cases:
        with CaptureQueriesContext(connection) as captured:
            rows = action()
        main_sql = [q["sql"] for q in captured.captured_queries if "history_workflowexecution" in q["sql"]][
            -1
        ]
        for _ in range(min(20, repeat)):
            action()  # warm up
        samples = []
        for _ in range(repeat):
            begin = time.perf_counter()
            action()
            samples.append((time.perf_counter() - begin) * 1000)
        results.append((label, pct(samples, 50), pct(samples, 99), rows, plan_summary(main_sql)))

    reference = results[0][1]
    print(f"\n{'query':<40} {'p50 ms':>8} {'p99 ms':>8} {'x ref':>7} {'rows':>6}")
    for label, p50, p99, rows, _ in results:
        shown = rows if isinstance(rows, int) else len(rows)
        print(f"{label:<40} {p50:>8.2f} {p99:>8.2f} {p50 / reference:>7.1f} {shown:>6}")
    print("\nplans:")
    for label, _, _, _, plan in results:
        print(f"  {label}: {plan}")


if __name__ == "__main__":
    main()
