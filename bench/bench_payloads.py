#!/usr/bin/env python
"""Payload store and retention figures: history size, payload fetch latency, expiry runs/s.

Creates a scratch database and archive directory, boots gunicorn and a shard owner, then:

1. signals one run 100 times with distinct 50 kB payloads, with the store on (2 KiB inline
   limit) and off (limit 0), and prints each run's history_size_bytes;
2. fetches one stored payload 200 times over REST and prints p50/p99 latency;
3. closes N runs (one 20 kB signal each), makes their retention due at once, and prints
   how many runs/s the shard owner archives and deletes, with archival on and off.

Usage: python bench/bench_payloads.py [--database-url URL] [--runs 300]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_batch_reset import THREADS, _boot
from run_bench import Api, log, pct, python_exe, with_db

from chronicle.launcher import ProcessGroup


def _payload(text: str) -> dict[str, object]:
    return {"metadata": {"encoding": "json/plain"}, "data": text}


def _history_size(api: Api, wid: str) -> int:
    api.post("/workflows", {"workflow_id": wid, "workflow_type": "Sizes", "task_queue": "sizes"})
    for i in range(100):
        body = {"signal_name": "s", "input": [_payload(f"{i}:" + "p" * 50_000)]}
        api.post(f"/workflows/{wid}/signal", body).raise_for_status()
    return int(api.client().get(f"{api.base}/workflows/{wid}").json()["history_size_bytes"])


def _fetch_latency(api: Api, wid: str) -> tuple[float, float]:
    events = api.client().get(f"{api.base}/workflows/{wid}/history").json()["events"]
    digest = next(e for e in events if e["event_type"] == "WorkflowExecutionSignaled")["attributes"]["input"][
        0
    ]["payload_ref"]["sha256"]
    took = []
    for _ in range(200):
        began = time.perf_counter()
        api.client().get(f"{api.base}/payloads/{digest}").raise_for_status()
        took.append(time.perf_counter() - began)
    return (pct(took, 50) or 0) * 1000, (pct(took, 99) or 0) * 1000


def _closed_runs(api: Api, prefix: str, n: int) -> None:
    def one(i: int) -> None:
        wid = f"{prefix}-{i}"
        api.post("/workflows", {"workflow_id": wid, "workflow_type": prefix, "task_queue": prefix})
        api.post(f"/workflows/{wid}/signal", {"signal_name": "s", "input": [_payload(f"{i}" * 20_000)]})
        api.post(f"/workflows/{wid}/terminate", {"reason": "bench"}).raise_for_status()

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(one, range(n)))


def _expire(dburl: str, prefix: str, n: int, *, archival: bool) -> float:
    """Make the runs' retention due now, wake the shard owner, time until all are gone."""
    with psycopg.connect(dburl, autocommit=True) as conn:
        conn.execute("UPDATE namespaces_namespace SET archival_enabled = %s", [archival])
        began = time.perf_counter()
        conn.execute(
            "UPDATE history_timertask SET fire_at = now() WHERE kind = 'retention' AND run_id IN "
            "(SELECT run_id FROM history_workflowexecution WHERE workflow_type = %s)",
            [prefix],
        )
        conn.execute(
            "SELECT pg_notify('chronicle_timers_v1', shard_id || '|' || extract(epoch from now())) "
            "FROM (SELECT DISTINCT shard_id FROM history_timertask) s"
        )
        while True:
            row = conn.execute(
                "SELECT count(*) FROM history_workflowexecution WHERE workflow_type = %s", [prefix]
            ).fetchone()
            if row is not None and row[0] == 0:
                return n / (time.perf_counter() - began)
            time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432"),
        help="server URL; a fresh database is created on it",
    )
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    dbname = f"chronicle_bench_{secrets.token_hex(4)}"
    admin_url = with_db(args.database_url, "postgres")
    dburl = with_db(args.database_url, dbname)
    archive = tempfile.mkdtemp(prefix="chronicle-archive-")
    env = dict(os.environ, DATABASE_URL=dburl, CHRONICLE_LOG_LEVEL="WARNING", CHRONICLE_ARCHIVE_DIR=archive)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    stack: ProcessGroup | None = None
    try:
        base, key, stack = _boot(env, python_exe())
        api = Api(base, key)
        log("history size, store on")
        stored = _history_size(api, "sizes-stored")
        p50, p99 = _fetch_latency(api, "sizes-stored")
        with psycopg.connect(dburl, autocommit=True) as conn:
            conn.execute("UPDATE namespaces_namespace SET payload_inline_limit_bytes = 0")
        log("history size, store off")
        inline = _history_size(api, "sizes-inline")
        n = args.runs
        log(f"closing {2 * n} runs")
        _closed_runs(api, "archived", n)
        _closed_runs(api, "deleted", n)
        log("expiring with archival")
        archived_rps = _expire(dburl, "archived", n, archival=True)
        log("expiring without archival")
        deleted_rps = _expire(dburl, "deleted", n, archival=False)
        files = sum(1 for _ in Path(archive).rglob("*.jsonl.gz"))
    finally:
        if stack is not None:
            stack.stop()
        shutil.rmtree(archive, ignore_errors=True)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    print(f"history_size_bytes, 100 signals of 50 kB, payload store on:  {stored:>10,}")
    print(f"history_size_bytes, 100 signals of 50 kB, payload store off: {inline:>10,}")
    print(f"GET /payloads/<digest> (50 kB), 200 calls:  p50 {p50:.1f} ms  p99 {p99:.1f} ms")
    print(f"retention with archival, {n} runs:     {archived_rps:7.1f} runs/s ({files} files written)")
    print(f"retention without archival, {n} runs:  {deleted_rps:7.1f} runs/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
