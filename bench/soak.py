#!/usr/bin/env python
"""Soak: the whole platform under a steady load for minutes, with faults at intervals.

Usage: python bench/soak.py [--database-url URL] [--minutes 10] [--starts-per-s 100]
       [--signals-per-start 2] [--sleep-s 2] [--fault-every 60] [--seed 7]

A scratch database, the stack of ``make run`` (frontend, one worker per two cores; shard owner,
batch runner) and one SDK worker process (bench/soak_workflow.py). This process starts
``Soak`` workflows open-loop at the asked rate; each sleeps until two seconds after its
start and is sent ``--signals-per-start`` token signals and a ``done`` signal right away.
Every ``--fault-every`` seconds one fault is injected, in turn (bench/soak_faults.py).
At most ``--in-flight`` workflows' calls are outstanding at once: past that, starts are
held back and counted, so an overloaded platform shows up as a lower achieved rate.

After the load, the soak waits for every run to close and checks, from the database,
every start and signal the platform acknowledged (bench/soak_check.py). It prints per
minute the achieved starts/s and signals/s and the timer lateness (when the sleep's
wake-up task started, after its due instant), and the memory (RSS) of every process at
start, end and peak; everything lands in bench/results/soak_latest.json. Exit 0 iff the
checks hold and every fault recovered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

from proc_cpu import CpuSnapshot, backend_pids, cpu_by_pid, process_tree  # noqa: E402
from run_bench import free_port, prepare_database, python_exe  # noqa: E402
from sdk_bench import scratch_database  # noqa: E402
from sdk_bench_workloads import pct  # noqa: E402
from soak_check import CheckTotals, check_runs, lateness_by_minute, read_runs  # noqa: E402
from soak_faults import Faults, memory_by_process  # noqa: E402
from soak_workflow import DONE_SIGNAL, TOKEN_SIGNAL, WORKFLOW  # noqa: E402

from chronicle.launcher import ProcessGroup, ProcessSpec, stack_processes  # noqa: E402
from sdk.client import Client  # noqa: E402
from sdk.exceptions import RPCError  # noqa: E402

NAMESPACE = "soak"
QUEUE = "soak-q"
RESULTS = BENCH_DIR / "results"
SAMPLE_EVERY = 5.0


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Ledger:
    """What the soak asked for and what it was told, by workflow id and signal token."""

    starts: dict[str, str] = field(default_factory=dict)  # workflow id -> ok / failed / unknown
    dues: dict[str, float] = field(default_factory=dict)  # workflow id -> due instant
    signals: dict[str, tuple[str, str]] = field(default_factory=dict)  # token -> (workflow id, outcome)
    ok_by_second: Counter[tuple[str, int]] = field(default_factory=Counter)  # (kind, second) -> count
    held_back: int = 0

    def note(self, kind: str, outcome: str, began: float) -> None:
        if outcome == "ok":
            self.ok_by_second[(kind, int(time.time() - began))] += 1


def outcome_of(exc: BaseException) -> str:
    """``failed`` only for a refusal that guarantees nothing applied; all else is ``unknown``."""
    return "failed" if isinstance(exc, RPCError) and 400 <= exc.status < 500 else "unknown"


class Load:
    """Soak workflows started at a steady rate, each sent its signals at once."""

    def __init__(self, client: Client, options: argparse.Namespace, ledger: Ledger) -> None:
        self.client = client
        self.options = options
        self.ledger = ledger
        self.began = time.time()
        self.in_flight: set[asyncio.Task[None]] = set()

    async def script(self, n: int) -> None:
        wid = f"soak-{n}"
        due = time.time() + self.options.sleep_s
        self.ledger.dues[wid] = due
        try:
            await self.client.start_workflow(WORKFLOW, args=[due], id=wid, task_queue=QUEUE, request_id=wid)
            outcome = "ok"
        except (RPCError, httpx.HTTPError, OSError) as exc:
            outcome = outcome_of(exc)
        self.ledger.starts[wid] = outcome
        self.ledger.note("start", outcome, self.began)
        if outcome == "failed":
            return
        handle = self.client.get_workflow_handle(wid)
        for k in range(self.options.signals_per_start):
            token = f"{wid}.{k}"
            outcome = await self._signal(handle, TOKEN_SIGNAL, [token])
            self.ledger.signals[token] = (wid, outcome)
            self.ledger.note("signal", outcome, self.began)
        # ``done`` until it is acknowledged: without it the run would wait for ever.
        while await self._signal(handle, DONE_SIGNAL, []) == "unknown":
            await asyncio.sleep(0.5)

    async def _signal(self, handle: Any, name: str, args: list[Any]) -> str:
        try:
            await handle.signal(name, args=args)
            return "ok"
        except (RPCError, httpx.HTTPError, OSError) as exc:
            return outcome_of(exc)

    async def run(self, seconds: float) -> None:
        """Start scripts at the asked rate for ``seconds``, open loop (a slow platform does
        not slow the ticks), holding back past ``--in-flight`` outstanding scripts."""
        interval = 1.0 / self.options.starts_per_s
        n = 0
        next_tick = time.monotonic()
        deadline = next_tick + seconds
        while next_tick < deadline:
            n += 1
            if len(self.in_flight) < self.options.in_flight:
                task = asyncio.create_task(self.script(n))
                self.in_flight.add(task)
                task.add_done_callback(self.in_flight.discard)
            else:
                self.ledger.held_back += 1
            next_tick += interval
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
        if self.in_flight:
            await asyncio.gather(*self.in_flight)


@dataclass
class Samples:
    """Memory of every process every few seconds, (seconds since start, {name: RSS MB}),
    and the CPU seconds each process (the stack's, its PostgreSQL backends', this one's)
    had used when first and last seen: a process started during the soak (a restart after
    a fault, a new connection) counts from 0. A killed process's last seconds before its
    kill are missed: at most one sampling interval's worth each."""

    rows: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    cpu_first: CpuSnapshot = field(default_factory=dict)
    cpu_last: CpuSnapshot = field(default_factory=dict)

    def note_cpu(self, snapshot: CpuSnapshot) -> None:
        baseline = not self.cpu_first
        for pid, seconds in snapshot.items():
            self.cpu_first.setdefault(pid, seconds if baseline else 0.0)
            self.cpu_last[pid] = seconds

    def cpu_seconds(self) -> float:
        return sum(self.cpu_last[pid] - first for pid, first in self.cpu_first.items())

    def summary(self) -> dict[str, dict[str, float]]:
        names = sorted({name for _, rss in self.rows for name in rss})
        out: dict[str, dict[str, float]] = {}
        for name in names:
            series = [rss[name] for _, rss in self.rows if name in rss]
            out[name] = {"start_mb": series[0], "end_mb": series[-1], "peak_mb": max(series)}
        return out


async def sample(
    stack: ProcessGroup, dburl: str, samples: Samples, stop: asyncio.Event, began: float
) -> None:
    while True:
        samples.rows.append((time.time() - began, memory_by_process(stack)))
        pids = process_tree({p.pid for p in stack.processes.values()}) | {os.getpid()}
        samples.note_cpu(cpu_by_pid(pids | await asyncio.to_thread(backend_pids, dburl)))
        if stop.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY)


async def drive(
    stack: ProcessGroup, url: str, key: str, dburl: str, options: argparse.Namespace
) -> dict[str, Any]:
    client = await Client.connect(url, namespace=NAMESPACE, api_key=key)
    ledger = Ledger()
    load = Load(client, options, ledger)
    faults = Faults(stack, url, dburl, random.Random(options.seed))
    samples, stop, drained = Samples(), asyncio.Event(), asyncio.Event()
    sampler = asyncio.create_task(sample(stack, dburl, samples, drained, load.began))
    nemesis = asyncio.create_task(faults.run(options.fault_every, stop))
    plan = f"{options.starts_per_s:g} starts/s for {options.minutes:g} min"
    log(f"load: {plan}, a fault every {options.fault_every:g} s")
    await load.run(options.minutes * 60)
    stop.set()
    await nemesis
    log(f"load done: {len(ledger.starts)} starts, {len(ledger.signals)} signals; draining")
    totals = await asyncio.to_thread(check_runs, dburl, ledger.starts, ledger.signals, options.drain)
    drained.set()  # the CPU the drain took counts: it is work the load asked for
    await sampler
    await client.close()
    return report(options, ledger, totals, samples, faults, dburl)


def per_minute(ledger: Ledger, kind: str, seconds: float) -> list[float]:
    """Acknowledged operations of ``kind`` per second, minute by minute of a load that
    lasted ``seconds`` (a last, shorter minute is divided by its own length)."""
    minutes = max(1, math.ceil(seconds / 60))
    return [
        sum(ledger.ok_by_second[(kind, s)] for s in range(m * 60, (m + 1) * 60))
        / max(1.0, min(60.0, seconds - m * 60))
        for m in range(minutes)
    ]


def report(
    options: argparse.Namespace,
    ledger: Ledger,
    totals: CheckTotals,
    samples: Samples,
    faults: Faults,
    dburl: str,
) -> dict[str, Any]:
    minutes = max(1, math.ceil(options.minutes))
    return {
        "plan": vars(options) | {"database_url": None},
        "starts_per_s": per_minute(ledger, "start", options.minutes * 60),
        "signals_per_s": per_minute(ledger, "signal", options.minutes * 60),
        "lateness_ms": [
            {"n": len(ms), "p50": pct(ms, 50), "p99": pct(ms, 99)}
            for ms in lateness_by_minute(read_runs(dburl), ledger.dues, minutes)
        ],
        "held_back": ledger.held_back,
        "outcomes": {
            "starts": dict(Counter(ledger.starts.values())),
            "signals": dict(Counter(outcome for _, outcome in ledger.signals.values())),
        },
        "checks": totals.as_dict(),
        "faults": faults.stats,
        "memory_mb": samples.summary(),
        "cpu_ms_per_workflow": samples.cpu_seconds() * 1000.0 / max(1, totals.runs),
    }


def table(figures: dict[str, Any]) -> str:
    lines = ["minute  starts/s  signals/s  lateness p50  lateness p99  (wake-up after the due instant)"]
    for m, (starts, signals) in enumerate(
        zip(figures["starts_per_s"], figures["signals_per_s"], strict=True)
    ):
        late = figures["lateness_ms"][m] if m < len(figures["lateness_ms"]) else {}
        p50, p99 = late.get("p50"), late.get("p99")
        lines.append(
            f"{m + 1:>6}  {starts:>8.1f}  {signals:>9.1f}  "
            f"{'-' if p50 is None else f'{p50:.0f} ms':>12}  {'-' if p99 is None else f'{p99:.0f} ms':>12}"
        )
    lines.append(f"held back (past the in-flight cap): {figures['held_back']}")
    cpu_ms = figures["cpu_ms_per_workflow"]
    ceiling = (os.cpu_count() or 1) * 1000.0 / cpu_ms if cpu_ms else 0.0
    lines.append(
        f"CPU per workflow, every process (its signals and sleep included): {cpu_ms:.1f} ms,"
        f" so at most {ceiling:.0f} workflows/s on {os.cpu_count()} cores"
    )
    lines.append(
        f"outcomes: starts {figures['outcomes']['starts']}, signals {figures['outcomes']['signals']}"
    )
    lines.append(
        "faults: "
        + ", ".join(
            f"{k} {v['injected']} injected / {v['recovered']} recovered" for k, v in figures["faults"].items()
        )
    )
    lines.append("checks: " + ", ".join(f"{k} {v}" for k, v in figures["checks"].items()))
    lines.append("memory (RSS MB, start → end, peak):")
    for name, mem in figures["memory_mb"].items():
        lines.append(
            f"  {name:<28} {mem['start_mb']:7.1f} → {mem['end_mb']:7.1f}  peak {mem['peak_mb']:7.1f}"
        )
    return "\n".join(lines)


def held(figures: dict[str, Any]) -> bool:
    faults_ok = all(v["injected"] == v["recovered"] for v in figures["faults"].values())
    return faults_ok and CheckTotals(**figures["checks"]).passed


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/soak.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--starts-per-s", type=float, default=100.0)
    parser.add_argument("--signals-per-start", type=int, default=2)
    parser.add_argument("--sleep-s", type=float, default=2.0, help="each workflow's durable sleep")
    parser.add_argument("--fault-every", type=float, default=60.0, help="seconds between faults (0: none)")
    parser.add_argument(
        "--in-flight", type=int, default=400, help="most workflows' calls outstanding at once"
    )
    parser.add_argument("--drain", type=float, default=300.0, help="seconds to wait for every run to close")
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args(argv)
    if options.starts_per_s <= 0 or options.minutes <= 0:
        parser.error("--starts-per-s and --minutes must be positive")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse(sys.argv[1:] if argv is None else argv)
    with scratch_database(options.database_url, "chronicle_soak") as dburl:
        env = dict(os.environ, DATABASE_URL=dburl, CHRONICLE_LOG_LEVEL="WARNING", CHRONICLE_ACCESS_LOG="")
        log("migrating a scratch database")
        key = prepare_database(env, NAMESPACE)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        worker_env = {
            "CHRONICLE_URL": url,
            "CHRONICLE_NAMESPACE": NAMESPACE,
            "CHRONICLE_API_KEY": key,
            "TASK_QUEUE": QUEUE,
        }
        worker = ProcessSpec("worker", [python_exe(), str(BENCH_DIR / "soak_workflow.py")], worker_env)
        specs = stack_processes(port, python=python_exe(), extra=[worker])
        with ProcessGroup(specs, env=env, log_dir=RESULTS / "soak_logs") as stack:
            stack.wait_http(url, timeout=60)
            figures = asyncio.run(drive(stack, url, key, dburl, options))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "soak_latest.json").write_text(json.dumps(figures, indent=2, default=str))
    print(table(figures))
    ok = held(figures)
    log("held" if ok else "did NOT hold: see the checks and faults above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
