#!/usr/bin/env python
"""Schedule firing lateness against plain user-timer lateness, in one run.

Creates a scratch database, boots gunicorn + the shard owner, then measures two
phases one after the other, both with N things due on every whole second:

1. reference: N workflows, each starting a user timer due at the next whole second
   whenever its workflow task arrives; lateness = TimerFired event time - due time;
2. schedules: N schedules firing every second (overlap ALLOW_ALL, so none is skipped);
   lateness = the started run's start time - its nominal time (the workflow id's suffix).

Both figures use the server's clock. Prints p50/p99/max per phase and a JSON line.

Usage: python bench/bench_schedules.py [--database-url URL] [--schedules N] [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_bench import (
    THREADS,
    Api,
    Json,
    free_port,
    log,
    prepare_database,
    python_exe,
    summary_ms,
    with_db,
)

from chronicle.launcher import ProcessGroup, frontend_process, shard_owner_process


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def phase_timers(api: Api, db: psycopg.Connection[Any], n: int, seconds: float) -> Json:
    """N workflows each re-arming a timer due at the next whole second."""
    log(f"reference: {n} workflows with a timer due each whole second for {seconds:.0f} s")
    queue = "q-ref-timers"
    due_at: dict[tuple[str, str], float] = {}
    lock = threading.Lock()
    stop = threading.Event()
    end = time.time() + seconds + 2

    def worker() -> None:
        while not stop.is_set():
            try:
                serve_one()
            except (RuntimeError, httpx.HTTPError) as exc:  # keep serving; the count shows losses
                log(f"reference worker: {exc}"[:200])

    def serve_one() -> None:
        task = api.poll_wft(queue, timeout=1)
        if task is None:
            return
        wid = task["workflow_execution"]["workflow_id"]
        now = time.time()
        if now > end:
            api.complete_wft(queue, task["task_token"], [{"command_type": "CompleteWorkflowExecution"}])
            return
        due = math.floor(now) + 1.0
        timer_id = f"t{int(due)}"
        with lock:
            due_at[(wid, timer_id)] = due
        command = {
            "command_type": "StartTimer",
            "attributes": {"timer_id": timer_id, "start_to_fire_timeout": max(0.001, due - time.time())},
        }
        api.complete_wft(queue, task["task_token"], [command])

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(THREADS)]
    for t in threads:
        t.start()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda i: api.start(f"ref-{i}", queue), range(n)))
    time.sleep(max(0.0, end - time.time()) + 2)
    stop.set()
    for t in threads:
        t.join(timeout=5)
    rows = db.execute(
        "SELECT w.workflow_id, e.attributes->>'timer_id', e.event_time "
        "FROM history_historyevent e JOIN history_workflowexecution w ON w.run_id = e.run_id "
        "WHERE e.event_type = 'TimerFired' AND w.task_queue = %s",
        [queue],
    ).fetchall()
    lateness = [t.timestamp() - due_at[(w, tid)] for w, tid, t in rows if (w, tid) in due_at]
    return {"fired": len(lateness), "lateness": summary_ms(lateness)}


def phase_schedules(api: Api, db: psycopg.Connection[Any], n: int, seconds: float) -> Json:
    log(f"schedules: {n} schedules firing every second for {seconds:.0f} s")
    body = {
        "spec": {"intervals": [{"every": 1}]},
        "action": {"workflow_type": "BenchWF", "workflow_id": "", "task_queue": "q-sched"},
        "policy": {"overlap": "ALLOW_ALL"},
    }

    def create(i: int) -> None:
        action = {**body["action"], "workflow_id": f"sched-{i}"}  # type: ignore[dict-item]
        r = api.post("/schedules", {"schedule_id": f"s{i}", "schedule": {**body, "action": action}})
        if r.status_code != 201:
            raise RuntimeError(f"create schedule: {r.status_code} {r.text[:300]}")

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(create, range(n)))
    started = time.time()
    time.sleep(seconds)
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda i: api.post(f"/schedules/s{i}/pause", {"note": "bench done"}), range(n)))
    rows = db.execute(
        "SELECT workflow_id, start_time FROM history_workflowexecution WHERE task_queue = 'q-sched'"
    ).fetchall()
    # the id ends in the nominal time, RFC 3339 to the second: "...-2026-01-05T09:00:00Z"
    lateness = [t.timestamp() - _ts(wid[-len("2026-01-05T09:00:00Z") :]) for wid, t in rows]
    expected = n * int(time.time() - started)
    return {"started": len(rows), "expected_about": expected, "lateness": summary_ms(lateness)}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432")
    ap.add_argument("--schedules", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--pool-max", type=int, default=8, help="connections per server process")
    args = ap.parse_args()
    dbname = f"chronicle_bench_{secrets.token_hex(4)}"
    admin_url, dburl = with_db(args.database_url, "postgres"), with_db(args.database_url, dbname)
    env = {
        **os.environ,
        "DATABASE_URL": dburl,
        "CHRONICLE_LOG_LEVEL": "WARNING",
        "CHRONICLE_DB_POOL_MAX": str(args.pool_max),
    }
    py = python_exe()
    stack: ProcessGroup | None = None
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    # One measuring connection, opened before the stack takes its share of a busy server's slots.
    db = psycopg.connect(dburl, autocommit=True)
    try:
        key = prepare_database(env)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        stack = ProcessGroup([frontend_process(port, python=py), shard_owner_process(python=py)], env=env)
        stack.start()
        stack.wait_http(base, timeout=60)
        api = Api(base, key)
        for _ in range(8):  # warm both frontend processes' connections one request at a time
            api.post("/task-queues/warm/workflow-tasks/poll", {"identity": "w", "timeout": 0.01})
        results: dict[str, Any] = {
            "schedules": args.schedules,
            "seconds": args.seconds,
            "reference_user_timers": phase_timers(api, db, args.schedules, args.seconds),
            "schedule_firings": phase_schedules(api, db, args.schedules, args.seconds),
        }
    finally:
        if stack is not None:
            stack.stop()
        db.close()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    _print(results)
    return 0


def _print(results: dict[str, Any]) -> None:
    print(f"{'phase':<34} {'n':>6} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    for label, key in (
        ("user timers (reference)", "reference_user_timers"),
        ("schedule firings", "schedule_firings"),
    ):
        s = results[key]["lateness"]
        p50, p99, worst = (s[k] or 0.0 for k in ("p50_ms", "p99_ms", "max_ms"))
        print(f"{label:<34} {s['n']:>6} {p50:>9.1f} {p99:>9.1f} {worst:>9.1f}")
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
