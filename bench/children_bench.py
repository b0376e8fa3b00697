#!/usr/bin/env python
"""Child workflow latency and fan-out throughput, measured on a real stack with a real SDK worker.

Creates a scratch database, boots gunicorn + the shard owner (as ``run_bench.py`` does),
runs R parents of one child each one after another, then one parent fanning out to N
children at once. From the server's event times it reports, per phase:

* start latency: a parent's ``StartChildWorkflowExecutionInitiated`` → its
  ``ChildWorkflowExecutionStarted`` (the start duty carried by the shard owner);
* close latency: the child's close event → the parent's ``ChildWorkflowExecutionCompleted``;
* children/s: children started and completed per second of a fan-out.

Usage: python bench/children_bench.py [--database-url URL] [--runs R] [--fan-out N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:0] = [str(ROOT), str(BENCH_DIR)]

from run_bench import free_port, log, pct, prepare_database, python_exe, with_db  # noqa: E402

from chronicle.launcher import ProcessGroup, frontend_process, shard_owner_process  # noqa: E402
from sdk import workflow  # noqa: E402
from sdk.client import Client, WorkflowHandle  # noqa: E402
from sdk.worker import Worker  # noqa: E402

QUEUE = "children-bench"


@workflow.defn
class BenchChild:
    @workflow.run
    async def run(self, n: int) -> int:
        return n


@workflow.defn
class BenchParent:
    @workflow.run
    async def run(self, children: int) -> int:
        prefix = workflow.info().workflow_id
        calls = [
            workflow.execute_child_workflow(BenchChild.run, i, id=f"{prefix}-{i}") for i in range(children)
        ]
        return sum(await asyncio.gather(*calls))


def _time(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["event_time"]).timestamp()


async def _events(handle: WorkflowHandle) -> list[dict[str, Any]]:
    return [event async for event in handle.fetch_history_events()]


async def _latencies(client: Client, parent: WorkflowHandle) -> tuple[list[float], list[float]]:
    events = await _events(parent)
    initiated = {
        e["event_id"]: e for e in events if e["event_type"] == "StartChildWorkflowExecutionInitiated"
    }
    start, close = [], []
    for event in events:
        attrs = event["attributes"]
        if event["event_type"] == "ChildWorkflowExecutionStarted":
            start.append(_time(event) - _time(initiated[attrs["initiated_event_id"]]))
        elif event["event_type"] == "ChildWorkflowExecutionCompleted":
            child = client.get_workflow_handle(attrs["workflow_execution"]["workflow_id"])
            child_events = await _events(child)
            close.append(_time(event) - _time(child_events[-1]))
    return start, close


async def _phase(
    client: Client, name: str, parents: int, children: int, *, one_by_one: bool
) -> dict[str, Any]:
    """Run ``parents`` parents of ``children`` concurrent children each; collect the latencies."""
    began = time.perf_counter()
    handles: list[WorkflowHandle] = []
    for i in range(parents):
        handle = await client.start_workflow(BenchParent.run, children, id=f"{name}-{i}", task_queue=QUEUE)
        handles.append(handle)
        if one_by_one:
            await handle.result()
    sums = await asyncio.gather(*(h.result() for h in handles))
    elapsed = time.perf_counter() - began
    assert all(s == sum(range(children)) for s in sums)
    start: list[float] = []
    close: list[float] = []
    for handle in handles:
        s, c = await _latencies(client, handle)
        start += s
        close += c
    return {"elapsed_s": elapsed, "start": start, "close": close, "total": parents * children}


async def _measure(base: str, key: str, runs: int, fan_out: int) -> dict[str, dict[str, Any]]:
    client = await Client.connect(base, namespace="bench", api_key=key)
    try:
        async with Worker(client, task_queue=QUEUE, workflows=[BenchParent, BenchChild]):
            await _phase(client, "warm", 2, 1, one_by_one=True)
            return {
                f"{runs} parents one after another, 1 child each": await _phase(
                    client, "single", runs, 1, one_by_one=True
                ),
                f"1 parent fanning out to {fan_out} children": await _phase(
                    client, "fan", 1, fan_out, one_by_one=False
                ),
            }
    finally:
        await client.close()


def _boot(dburl: str) -> tuple[str, str, ProcessGroup]:
    """Migrate, make the bench namespace and start the stack (frontend and shard owner)."""
    env = dict(os.environ, DATABASE_URL=dburl, CHRONICLE_LOG_LEVEL="WARNING")
    py = python_exe()
    key = prepare_database(env)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    stack = ProcessGroup(
        [frontend_process(port, python=py, workers=2), shard_owner_process(python=py)], env=env
    )
    stack.start()
    stack.wait_http(base, timeout=60)
    return base, key, stack


def _ms(values: list[float], p: float) -> str:
    value = pct(values, p)
    return "n/a" if value is None else f"{value * 1000:.0f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--database-url", default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432")
    )
    ap.add_argument("--runs", type=int, default=20, help="parents with one child, one after another")
    ap.add_argument("--fan-out", type=int, default=50, help="children of the fan-out parent")
    args = ap.parse_args()
    dbname = f"chronicle_bench_{secrets.token_hex(4)}"
    admin_url = with_db(args.database_url, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    stack: ProcessGroup | None = None
    try:
        log(f"booting on {dbname}")
        base, key, stack = _boot(with_db(args.database_url, dbname))
        log(f"{args.runs} single-child parents, then a fan-out of {args.fan_out}")
        phases = asyncio.run(_measure(base, key, args.runs, args.fan_out))
    finally:
        if stack is not None:
            stack.stop()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    for name, phase in phases.items():
        start, close = phase["start"], phase["close"]
        print(f"{name}: {phase['total']} children in {phase['elapsed_s']:.1f} s")
        print(f"  children/s (start, run, report back): {phase['total'] / phase['elapsed_s']:.1f}")
        print(
            f"  start latency (Initiated to ChildWorkflowExecutionStarted): {_ms(start, 50)} p50, "
            f"{_ms(start, 99)} p99"
        )
        print(
            f"  close latency (child closed to the parent's Child*Completed): {_ms(close, 50)} p50, "
            f"{_ms(close, 99)} p99"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
