#!/usr/bin/env python
"""SDK benchmark: Chronicle with real SDK worker processes beside DBOS Transact and Restate.

Usage: python bench/sdk_bench.py [--database-url URL] [--systems chronicle,inprocess,dbos,restate]
       [--profile] [--sequential N] [--concurrent N] [--concurrency N] [--ten-step-runs N]
       [--sleeps N[,N...]] [--warmup N]

Chronicle gets a scratch database, the frontend (gunicorn, 2 uvicorn workers) and the shard
owner. Two Chronicle deployments are measured on it, one after the other:

* ``chronicle``: one SDK worker process (bench/sdk_bench_worker.py) and this process as the
  application, starting workflows with ``sdk.client.Client`` and awaiting their results;
* ``inprocess``: one application process that hosts the worker and starts the workflows
  with eager start, the shape of a DBOS application.

DBOS runs bench/sdk_bench_dbos.py in its own process on its own scratch database on the
same PostgreSQL server. Restate runs bench/sdk_bench_restate.py in its own process: a
Restate server (installed from npm on first use), a Python service process and that process
as the client; it is skipped, with the reason printed, when it cannot be installed. All run
the workloads of bench/sdk_bench_workloads.py; the table puts the figures side by side with
the ratios Chronicle / DBOS and Chronicle / Restate. ``--profile`` also profiles
the worker process (cProfile) and one frontend process (py-spy, when installed) during
the ``chronicle`` run and prints where the time goes. Everything lands in
bench/results/sdk_latest.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from proc_cpu import CpuSnapshot, backend_pids, cpu_by_pid, process_tree
from run_bench import free_port, prepare_database, python_exe, stop_process, with_db
from sdk_bench_workloads import CpuProbe, Json, Plan, measure

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo's sdk, installed or not
from sdk_bench_worker import ChronicleSystem

from chronicle.launcher import ProcessGroup, stack_processes
from sdk.client import Client

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS = BENCH_DIR / "results"
NAMESPACE = "bench"
QUEUE = "sdk-bench"


def log(message: str) -> None:
    print(f"[sdk-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextmanager
def scratch_database(server_url: str, prefix: str) -> Iterator[str]:
    """A fresh database on the server for one system, dropped afterwards (kept, and named,
    with ``BENCH_KEEP_DATABASES=1``, to read the histories a run left)."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = with_db(server_url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_db(server_url, name)
    finally:
        if os.environ.get("BENCH_KEEP_DATABASES") == "1":
            log(f"kept the scratch database {name}")
        else:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --------------------------------------------------------------------------- Chronicle


def worker_env(env: dict[str, str], url: str, key: str) -> dict[str, str]:
    return {
        **env,
        "PYTHONPATH": str(ROOT),
        "CHRONICLE_URL": url,
        "CHRONICLE_NAMESPACE": NAMESPACE,
        "CHRONICLE_API_KEY": key,
        "TASK_QUEUE": QUEUE,
    }


def start_worker(env: dict[str, str], url: str, key: str, profile: Path | None) -> subprocess.Popen[bytes]:
    process_env = worker_env(env, url, key)
    if profile is not None:
        process_env["BENCH_PROFILE"] = str(profile)
    return subprocess.Popen([python_exe(), str(BENCH_DIR / "sdk_bench_worker.py")], cwd=ROOT, env=process_env)


def frontend_worker_pid(master: subprocess.Popen[bytes]) -> int | None:
    """One of gunicorn's worker processes (the children of its master)."""
    children = Path(f"/proc/{master.pid}/task/{master.pid}/children")
    pids = children.read_text().split() if children.exists() else []
    return int(pids[0]) if pids else None


def start_py_spy(pid: int | None, out: Path) -> subprocess.Popen[bytes] | None:
    exe = shutil.which("py-spy") or str(Path(python_exe()).parent / "py-spy")
    if pid is None or not Path(exe).exists():
        log("py-spy not installed (requirements-bench.txt); no frontend profile")
        return None
    cmd = [
        exe,
        "record",
        "--pid",
        str(pid),
        "--format",
        "raw",
        "--output",
        str(out),
        "--rate",
        "200",
        "--gil",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def chronicle_cpu_probe(stack: ProcessGroup, worker: subprocess.Popen[bytes], dburl: str) -> CpuProbe:
    """CPU by part of the deployment: frontends, daemons, the SDK worker, PostgreSQL, and
    this process (the application starting workflows and waiting for their results)."""
    frontend = process_tree({stack.processes["frontend"].pid})
    daemons = process_tree({p.pid for name, p in stack.processes.items() if name != "frontend"})

    def probe() -> dict[str, CpuSnapshot]:
        return {
            "frontend": cpu_by_pid(frontend),
            "daemons": cpu_by_pid(daemons),
            "worker": cpu_by_pid({worker.pid}),
            "postgres": cpu_by_pid(backend_pids(dburl)),
            "application": cpu_by_pid({os.getpid()}),
        }

    return probe


async def drive_chronicle(url: str, key: str, plan: Plan, cpu: CpuProbe) -> Json:
    client = await Client.connect(url, namespace=NAMESPACE, api_key=key)
    try:
        return await measure(ChronicleSystem(client, QUEUE), plan, log, cpu)
    finally:
        await client.close()


def run_in_process(env: dict[str, str], url: str, key: str, plan: Plan) -> Json:
    """The application process with the worker inside it (eager start), on its own task queue."""
    app_env = {**worker_env(env, url, key), "TASK_QUEUE": QUEUE + "-in-process"}
    cmd = [python_exe(), str(BENCH_DIR / "sdk_bench_worker.py"), "--drive", *plan.as_args()]
    out = subprocess.run(cmd, cwd=ROOT, env=app_env, stdout=subprocess.PIPE, text=True, check=False)
    if out.returncode != 0:
        return {"error": f"in-process run exited {out.returncode}"}
    figures: Json = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def run_chronicle(server_url: str, plan: Plan, systems: set[str], profile: bool) -> tuple[Json, Json]:
    """Both Chronicle deployments on one server: (worker process, in-process)."""
    with scratch_database(server_url, "chronicle_sdkbench") as dburl:
        # The access log off, as in run_bench.py: the figures are the engine's, not logging's.
        env = dict(os.environ, DATABASE_URL=dburl, CHRONICLE_LOG_LEVEL="WARNING", CHRONICLE_ACCESS_LOG="")
        log("Chronicle: migrating a scratch database")
        key = prepare_database(env, NAMESPACE)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        figures: Json = {}
        in_process: Json = {}
        worker_profile = RESULTS / "sdk_worker.pstats" if profile else None
        stack = ProcessGroup(stack_processes(port, python=python_exe()), env=env, log_dir=RESULTS / "logs")
        with stack:
            stack.wait_http(url, timeout=60)
            if "chronicle" in systems:
                figures = measure_with_worker_process(env, url, key, plan, stack, worker_profile)
            if "inprocess" in systems:
                log("Chronicle: one application process hosting the worker, eager start")
                in_process = run_in_process(env, url, key, plan)
    return figures, in_process


def measure_with_worker_process(
    env: dict[str, str],
    url: str,
    key: str,
    plan: Plan,
    stack: ProcessGroup,
    worker_profile: Path | None,
) -> Json:
    worker = start_worker(env, url, key, worker_profile)
    spy_out = RESULTS / "sdk_frontend.pyspy.txt"
    spy = start_py_spy(frontend_worker_pid(stack.processes["frontend"]), spy_out) if worker_profile else None
    log("Chronicle: one SDK worker process, this process the application")
    try:
        cpu = chronicle_cpu_probe(stack, worker, env["DATABASE_URL"])
        figures = asyncio.run(drive_chronicle(url, key, plan, cpu))
    finally:
        if spy is not None:
            spy.send_signal(2)  # py-spy writes its output on SIGINT
            spy.wait(30)
        stop_process(worker)
    if worker_profile is not None and worker_profile.exists():
        figures["worker_profile"] = summarise_pstats(worker_profile)
    if spy is not None and spy_out.exists():
        figures["frontend_profile"] = summarise_py_spy(spy_out)
    return figures


# --------------------------------------------------------------------------- profiles


def summarise_pstats(path: Path, top: int = 15) -> list[Json]:
    """The functions with the most own time (tottime) in the worker."""
    stats = pstats.Stats(str(path))
    rows: list[Json] = []
    entries: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in entries.values()) or 1.0
    for (file, line, fn), (_cc, calls, own, cum, _callers) in sorted(
        entries.items(), key=lambda kv: kv[1][2], reverse=True
    )[:top]:
        where = f"{Path(file).name}:{line}({fn})"
        rows.append({"function": where, "calls": calls, "own_s": own, "cum_s": cum, "own_share": own / total})
    return rows


# Where a frontend sample is, judged from its innermost frame outwards: the first match names it.
SAMPLE_KINDS = [
    ("threads waiting (sync views handed to threads, locks)", ("threading.py", "concurrent/futures")),
    ("PostgreSQL round trips (psycopg)", ("psycopg/", "psycopg_pool/")),
    ("Django ORM building SQL and models", ("django/db/",)),
    ("DRF request/serializer work", ("rest_framework/",)),
    ("JSON", ("json/",)),
    ("Chronicle's own code", ("history/", "matching/", "executions/", "namespaces/", "chronicle/")),
    ("event loop and sockets", ("asyncio/", "selectors.py", "uvicorn/", "h11/")),
]


def summarise_py_spy(path: Path) -> list[Json]:
    """py-spy's collapsed stacks, by what the innermost recognised frame was doing."""
    counts: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        kind = _sample_kind(stack.split(";"))
        counts[kind] = counts.get(kind, 0) + int(count)
    ranked = sorted(counts.items(), key=lambda kv: kv[1], reverse=True)
    return [{"frame": kind, "share": n / (total or 1)} for kind, n in ranked]


def _sample_kind(frames: list[str]) -> str:
    for frame in reversed(frames):
        for kind, markers in SAMPLE_KINDS:
            if any(marker in frame for marker in markers):
                return kind
    return "other"


# --------------------------------------------------------------------------- DBOS


def run_dbos(server_url: str, plan: Plan) -> Json:
    try:
        import dbos  # noqa: F401
    except ImportError:
        log("DBOS is not installed: pip install -r requirements-bench.txt")
        return {"error": "dbos not installed"}
    with scratch_database(server_url, "dbos_sdkbench") as dburl:
        cmd = [python_exe(), str(BENCH_DIR / "sdk_bench_dbos.py"), "--database-url", dburl, *plan.as_args()]
        out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    if out.returncode != 0:
        return {"error": f"DBOS run exited {out.returncode}"}
    figures: Json = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


# --------------------------------------------------------------------------- Restate


def run_restate(plan: Plan) -> Json:
    """The Restate deployment in its own process; ``{"skipped": reason}`` when it cannot run."""
    cmd = [python_exe(), str(BENCH_DIR / "sdk_bench_restate.py"), *plan.as_args()]
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return {"error": f"Restate run exited {out.returncode}"}
    figures: Json = json.loads(lines[-1])
    return figures


# --------------------------------------------------------------------------- table


def dig(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


ROWS: list[tuple[str, tuple[str, ...], str, bool]] = [
    # label, path into the figures, unit, higher is better
    ("one-step wf/s, concurrency 1", ("sequential", "workflows_per_s"), "/s", True),
    ("  latency p50", ("sequential", "latency", "p50_ms"), " ms", False),
    ("  latency p99", ("sequential", "latency", "p99_ms"), " ms", False),
    ("one-step wf/s, concurrency 32", ("concurrent", "workflows_per_s"), "/s", True),
    ("  latency p50", ("concurrent", "latency", "p50_ms"), " ms", False),
    ("  latency p99", ("concurrent", "latency", "p99_ms"), " ms", False),
    ("  CPU per workflow", ("concurrent", "cpu_ms_per_workflow", "total"), " ms", False),
    ("local step wf/s, concurrency 1", ("local_sequential", "workflows_per_s"), "/s", True),
    ("  latency p50", ("local_sequential", "latency", "p50_ms"), " ms", False),
    ("  latency p99", ("local_sequential", "latency", "p99_ms"), " ms", False),
    ("local step wf/s, concurrency 32", ("local_concurrent", "workflows_per_s"), "/s", True),
    ("  latency p50", ("local_concurrent", "latency", "p50_ms"), " ms", False),
    ("  latency p99", ("local_concurrent", "latency", "p99_ms"), " ms", False),
    ("  CPU per workflow", ("local_concurrent", "cpu_ms_per_workflow", "total"), " ms", False),
    ("ten-step workflow p50", ("ten_steps", "latency", "p50_ms"), " ms", False),
    ("ten-step workflow p99", ("ten_steps", "latency", "p99_ms"), " ms", False),
]


def sleep_rows(plan: Plan) -> list[tuple[str, tuple[str, ...], str, bool]]:
    """Lateness p50 and p99 for each sleep-storm size of the plan."""
    return [
        (f"{n:,} sleeps: lateness {p}", ("sleeps", str(n), "lateness", f"{p}_ms"), " ms", False)
        for n in plan.sleeps
        for p in ("p50", "p99")
    ]


def cell(value: Any, unit: str) -> str:
    return "n/a" if not isinstance(value, int | float) else f"{value:,.1f}{unit}"


def ratio(ours: Any, theirs: Any, higher_is_better: bool) -> str:
    if not isinstance(ours, int | float) or not isinstance(theirs, int | float) or not theirs:
        return ""
    value = ours / theirs
    better = value >= 1 if higher_is_better else value <= 1
    return f"{value:.2f}x {'(better)' if better else '(worse)'}"


COLUMNS = [
    ("chronicle", "Chronicle"),
    ("inprocess", "Chronicle in-process"),
    ("dbos", "DBOS"),
    ("restate", "Restate"),
]
PEERS = [(2, "DBOS"), (3, "Restate")]  # the peers' places in COLUMNS


def table(results: Json, plan: Plan) -> str:
    """One row per figure: each system's value, then each Chronicle deployment's ratio to each peer."""
    ratio_heads = [f"{ours}/{peer}" for _, peer in PEERS for ours in ("Chronicle", "in-process")]
    head = ("workload", *(title for _, title in COLUMNS), *ratio_heads)
    rows = []
    for label, path, unit, up in [*ROWS, *sleep_rows(plan)]:
        values = [dig(results.get(key), *path) for key, _ in COLUMNS]
        ratios = [ratio(values[ours], values[peer], up) for peer, _ in PEERS for ours in (0, 1)]
        cells = [
            cell(v, unit) + ("*" if overran(results.get(key), path) else "")
            for v, (key, _) in zip(values, COLUMNS, strict=True)
        ]
        rows.append((label, *cells, *ratios))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    rule = "  ".join("-" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([*lines, rule])


def cpu_text(results: Json) -> str:
    """Where each system's CPU per workflow goes at concurrency 32 and in the sleep storms
    (from the due instant on), by group of processes."""
    lines = ["CPU per workflow at concurrency 32 and per woken sleep, by process group (ms):"]
    storms = [(("sleeps", str(n)), f"{n:,} sleeps") for n in (results.get("plan") or {}).get("sleeps") or ()]
    for key, title in COLUMNS:
        phases = [(("concurrent",), "one-step"), (("local_concurrent",), "local step"), *storms]
        for phase, workload in phases:
            groups = dig(results.get(key), *phase, "cpu_ms_per_workflow")
            if isinstance(groups, dict):
                parts = ", ".join(f"{g} {ms:.1f}" for g, ms in groups.items() if g != "total")
                lines.append(f"  {title}, {workload}: {parts}; total {groups['total']:.1f}")
    return "\n".join(lines) if len(lines) > 1 else ""


def overran(figures: Any, path: tuple[str, ...]) -> bool:
    """Whether a sleep storm's starts ran past the due instant (its lateness then includes them)."""
    margin = dig(figures, *path[:2], "start_margin_s") if path[0] == "sleeps" else None
    return isinstance(margin, int | float) and margin < 0


def overrun_text(results: Json, plan: Plan) -> str:
    """The footnote to the cells marked * in the table."""
    lines = []
    for key, title in COLUMNS:
        for n in plan.sleeps:
            if overran(results.get(key), ("sleeps", str(n))):
                margin = dig(results.get(key), "sleeps", str(n), "start_margin_s")
                lines.append(
                    f"* {title}, {n:,} sleeps: starting them all overran the due instant by {-margin:.1f} s, "
                    "so the lateness counts the start backlog too"
                )
    return "\n".join(lines)


def not_run_text(results: Json) -> str:
    """A line for each system that was asked for but gave no figures, with the reason."""
    lines = []
    for key, title in COLUMNS:
        figures = results.get(key)
        if isinstance(figures, dict) and (figures.get("skipped") or figures.get("error")):
            lines.append(f"{title} skipped: {figures.get('skipped') or figures.get('error')}")
    return "\n".join(lines)


def profile_text(chronicle: Json) -> str:
    lines: list[str] = []
    if chronicle.get("worker_profile"):
        lines.append("SDK worker, own time by function (cProfile):")
        lines += [
            f"  {r['own_share']:6.1%}  {r['function']}  calls={r['calls']}"
            for r in chronicle["worker_profile"]
        ]
    if chronicle.get("frontend_profile"):
        lines.append("one frontend process, samples by what they were doing (py-spy):")
        lines += [f"  {r['share']:6.1%}  {r['frame']}" for r in chronicle["frontend_profile"]]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def parse(argv: list[str]) -> tuple[argparse.Namespace, Plan]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432"),
        help="PostgreSQL server; each system gets a fresh database on it",
    )
    parser.add_argument("--systems", default="chronicle,inprocess,dbos,restate")
    parser.add_argument("--profile", action="store_true", help="profile the worker and a frontend process")
    Plan.add_arguments(parser)
    ns = parser.parse_args(argv)
    return ns, Plan.from_arguments(ns)


def main(argv: list[str]) -> int:
    args, plan = parse(argv)
    RESULTS.mkdir(exist_ok=True)
    systems = {s.strip() for s in args.systems.split(",")}
    results: Json = {"plan": plan.__dict__}
    if systems & {"chronicle", "inprocess"}:
        results["chronicle"], results["inprocess"] = run_chronicle(
            args.database_url, plan, systems, args.profile
        )
    if "dbos" in systems:
        results["dbos"] = run_dbos(args.database_url, plan)
    if "restate" in systems:
        log("Restate: server, one service process, a client process")
        results["restate"] = run_restate(plan)
    (RESULTS / "sdk_latest.json").write_text(json.dumps(results, indent=2) + "\n")
    print(table(results, plan))
    print(cpu_text(results))
    for notes in (overrun_text(results, plan), not_run_text(results)):
        if notes:
            print(notes)
    if args.profile:
        print(profile_text(results.get("chronicle") or {}))
    log(f"wrote {(RESULTS / 'sdk_latest.json').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
