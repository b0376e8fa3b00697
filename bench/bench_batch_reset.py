#!/usr/bin/env python
"""Batch reset throughput: runs/s of one batch job, beside single REST resets.

Creates a scratch database, boots gunicorn, a shard owner and a batch runner, makes
N idle runs (first workflow task completed), resets them all with one batch job at
its highest rate, then resets N more one REST call at a time (sequentially, then
from 8 threads), and prints runs/s for each.

Usage: python bench/bench_batch_reset.py [--database-url URL] [--runs 500]
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_bench import LOG_DIR, Api, free_port, log, prepare_database, python_exe, with_db

from chronicle.launcher import ProcessGroup, ProcessSpec, frontend_process, shard_owner_process

THREADS = 8
MAX_RPS = 1000


def _boot(env: dict[str, str], py: str) -> tuple[str, str, ProcessGroup]:
    key = prepare_database(env)
    port = free_port()
    batch_runner = ProcessSpec("batch_runner", [py, "manage.py", "run_batch_jobs", "--poll-interval", "0.2"])
    specs = [frontend_process(port, python=py, workers=2), shard_owner_process(python=py), batch_runner]
    stack = ProcessGroup(specs, env={**env, "CHRONICLE_ACCESS_LOG": ""}, log_dir=LOG_DIR).start()
    base = f"http://127.0.0.1:{port}"
    try:
        stack.wait_http(base, timeout=60)
    except Exception:
        stack.stop()
        raise
    return base, key, stack


def _idle_runs(api: Api, prefix: str, n: int) -> list[str]:
    """Start n runs and complete each first workflow task with no commands (8 threads)."""
    queue = f"{prefix}-q"
    wids = [f"{prefix}-{i}" for i in range(n)]

    def start(wid: str) -> None:
        api.post(
            "/workflows", {"workflow_id": wid, "workflow_type": prefix, "task_queue": queue}
        ).raise_for_status()

    def drain(_: int) -> int:
        done = 0
        while True:
            task = api.poll_wft(queue, timeout=1.0)
            if task is None:
                return done
            api.complete_wft(queue, task["task_token"], [])
            done += 1

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(start, wids))
        drained = sum(pool.map(drain, range(THREADS)))
    assert drained == n, f"completed {drained} of {n} first workflow tasks"
    return wids


def _batch_reset(api: Api, prefix: str, n: int) -> float:
    body = {
        "operation": "reset",
        "query": f"WorkflowType = '{prefix}' AND ExecutionStatus = 'Running'",
        "reason": "bench",
        "reset_type": "FirstWorkflowTask",
        "rps": MAX_RPS,
        "job_id": prefix,
    }
    r = api.post("/batch-operations", body)
    r.raise_for_status()
    while True:
        job = api.client().get(f"{api.base}/batch-operations/{prefix}").json()
        if job["state"] != "Running":
            break
        time.sleep(0.2)
    assert (job["done"], job["failed"]) == (n, 0), job
    took = (
        datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["created_at"])
    ).total_seconds()
    return n / took


def _single_resets(api: Api, wids: list[str], threads: int) -> float:
    def reset(wid: str) -> None:
        r = api.post(f"/workflows/{wid}/reset", {"reason": "bench", "reset_type": "FirstWorkflowTask"})
        assert r.status_code == 200, r.text

    began = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(reset, wids))
    return len(wids) / (time.perf_counter() - began)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432"),
        help="server URL; a fresh database is created on it",
    )
    ap.add_argument("--runs", type=int, default=500)
    args = ap.parse_args()
    dbname = f"chronicle_bench_{secrets.token_hex(4)}"
    admin_url = with_db(args.database_url, "postgres")
    env = dict(os.environ, DATABASE_URL=with_db(args.database_url, dbname), CHRONICLE_LOG_LEVEL="WARNING")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    stack: ProcessGroup | None = None
    try:
        base, key, stack = _boot(env, python_exe())
        api = Api(base, key)
        n = args.runs
        log(f"making {n} idle runs for the batch")
        _idle_runs(api, "batch", n)
        log("batch reset")
        batch_rps = _batch_reset(api, "batch", n)
        log(f"making {2 * n} idle runs for single resets")
        sequential = _idle_runs(api, "single", n)
        threaded = _idle_runs(api, "threaded", n)
        log("single REST resets")
        one_by_one = _single_resets(api, sequential, 1)
        parallel = _single_resets(api, threaded, THREADS)
    finally:
        if stack is not None:
            stack.stop()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    print(f"batch reset, one job, {n} runs:             {batch_rps:7.1f} runs/s")
    print(f"single REST resets, one at a time, {n} runs:  {one_by_one:7.1f} runs/s")
    print(f"single REST resets, {THREADS} threads, {n} runs:    {parallel:7.1f} runs/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
