#!/usr/bin/env python
"""SDK benchmark: Chronicle with real SDK worker processes beside DBOS Transact, same workloads.

Usage: python bench/sdk_bench.py [--database-url URL] [--systems chronicle,dbos] [--profile]
       [--sequential N] [--concurrent N] [--concurrency N] [--ten-step-runs N] [--sleeps N]

For Chronicle it creates a scratch database, starts the frontend (gunicorn, 2 uvicorn
workers) and the shard owner, and one SDK worker process (bench/sdk_bench_worker.py);
this process is the application, starting workflows with ``sdk.client.Client`` and
awaiting their results. For DBOS it runs bench/sdk_bench_dbos.py in its own process on
its own scratch database on the same PostgreSQL server. Both run the workloads of
bench/sdk_bench_workloads.py; the table puts the figures side by side with the ratio
Chronicle / DBOS. ``--profile`` also profiles the worker (cProfile) and one frontend
process (py-spy, when installed) during the Chronicle run and prints where time goes.
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
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from run_bench import free_port, python_exe, stop_procs, with_db
from sdk_bench_workloads import Json, Plan, measure

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo's sdk, installed or not
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
    """A fresh database on the server for one system, dropped afterwards."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = with_db(server_url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_db(server_url, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --------------------------------------------------------------------------- Chronicle


class ChronicleSystem:
    """The workloads through the SDK client, as an application would call them."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def one_step(self, key: str) -> None:
        await self.client.execute_workflow("OneStep", id=key, task_queue=QUEUE)

    async def ten_steps(self, key: str) -> None:
        await self.client.execute_workflow("TenSteps", id=key, task_queue=QUEUE)

    async def start_sleep(self, key: str, due: float) -> Callable[[], Awaitable[float]]:
        handle = await self.client.start_workflow("SleepUntil", due, id=key, task_queue=QUEUE)

        async def lateness() -> float:
            value: float = await handle.result()
            return value

        return lateness


def prepare_chronicle(env: dict[str, str]) -> str:
    """Migrate the scratch database and issue an API key for the bench namespace."""
    py = python_exe()
    subprocess.run([py, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    snippet = (
        "from namespaces.services import namespace_create, api_key_issue; "
        f'ns=namespace_create(name="{NAMESPACE}", request_rps=0); '
        'print(api_key_issue(namespace=ns, name="b", roles=["client","worker","admin"])[1])'
    )
    out = subprocess.run(
        [py, "manage.py", "shell", "-c", snippet],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1].strip()


def start_server(env: dict[str, str], port: int) -> list[subprocess.Popen[bytes]]:
    py = python_exe()
    frontend = [py, "-m", "gunicorn", "chronicle.asgi:application", "-k", "uvicorn_worker.UvicornWorker"]
    frontend += ["-w", "2", "-b", f"127.0.0.1:{port}", "--log-level", "warning"]
    return [
        subprocess.Popen(frontend, cwd=ROOT, env=env),
        subprocess.Popen([py, "manage.py", "run_shard_owner"], cwd=ROOT, env=env),
    ]


async def wait_for_server(url: str, procs: list[subprocess.Popen[bytes]]) -> None:
    import httpx

    deadline = time.monotonic() + 60
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                break
            try:
                if (await http.get(url + "/api/schema/", timeout=5)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.3)
    raise RuntimeError("the Chronicle server did not come up")


def start_worker(env: dict[str, str], url: str, key: str, profile: Path | None) -> subprocess.Popen[bytes]:
    worker_env = {
        **env,
        "PYTHONPATH": str(ROOT),
        "CHRONICLE_URL": url,
        "CHRONICLE_NAMESPACE": NAMESPACE,
        "CHRONICLE_API_KEY": key,
        "TASK_QUEUE": QUEUE,
    }
    if profile is not None:
        worker_env["BENCH_PROFILE"] = str(profile)
    return subprocess.Popen([python_exe(), str(BENCH_DIR / "sdk_bench_worker.py")], cwd=ROOT, env=worker_env)


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
    cmd = [exe, "record", "--pid", str(pid), "--format", "raw", "--output", str(out), "--rate", "200"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def drive_chronicle(url: str, key: str, plan: Plan) -> Json:
    client = await Client.connect(url, namespace=NAMESPACE, api_key=key)
    try:
        return await measure(ChronicleSystem(client), plan, log)
    finally:
        await client.close()


def run_chronicle(server_url: str, plan: Plan, profile: bool) -> Json:
    with scratch_database(server_url, "chronicle_sdkbench") as dburl:
        env = dict(os.environ, DATABASE_URL=dburl, CHRONICLE_LOG_LEVEL="WARNING")
        log("Chronicle: migrating a scratch database")
        key = prepare_chronicle(env)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        procs = start_server(env, port)
        spy: subprocess.Popen[bytes] | None = None
        worker_profile = RESULTS / "sdk_worker.pstats" if profile else None
        try:
            asyncio.run(wait_for_server(url, procs))
            procs.append(start_worker(env, url, key, worker_profile))
            if profile:
                spy = start_py_spy(frontend_worker_pid(procs[0]), RESULTS / "sdk_frontend.pyspy.txt")
            log(f"Chronicle: server on :{port}, one SDK worker process")
            figures = asyncio.run(drive_chronicle(url, key, plan))
        finally:
            if spy is not None:
                spy.send_signal(2)  # py-spy writes its output on SIGINT
                spy.wait(30)
            stop_procs(procs[::-1])  # the worker first, so it finishes while the server is up
    if worker_profile is not None and worker_profile.exists():
        figures["worker_profile"] = summarise_pstats(worker_profile)
    spy_out = RESULTS / "sdk_frontend.pyspy.txt"
    if profile and spy_out.exists():
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


def summarise_py_spy(path: Path, top: int = 15) -> list[Json]:
    """Leaf frames of py-spy's collapsed stacks, by share of samples."""
    leaves: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        leaf = stack.split(";")[-1]
        leaves[leaf] = leaves.get(leaf, 0) + int(count)
    ranked = sorted(leaves.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return [{"frame": frame, "share": n / (total or 1)} for frame, n in ranked]


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
    ("ten-step workflow p50", ("ten_steps", "latency", "p50_ms"), " ms", False),
    ("ten-step workflow p99", ("ten_steps", "latency", "p99_ms"), " ms", False),
    ("500 sleeps: lateness p50", ("sleeps", "lateness", "p50_ms"), " ms", False),
    ("500 sleeps: lateness p99", ("sleeps", "lateness", "p99_ms"), " ms", False),
]


def cell(value: Any, unit: str) -> str:
    return "n/a" if not isinstance(value, int | float) else f"{value:,.1f}{unit}"


def ratio(ours: Any, theirs: Any, higher_is_better: bool) -> str:
    if not isinstance(ours, int | float) or not isinstance(theirs, int | float) or not theirs:
        return ""
    value = ours / theirs
    better = value >= 1 if higher_is_better else value <= 1
    return f"{value:.2f}x {'(better)' if better else '(worse)'}"


def table(chronicle: Json, dbos: Json, plan: Plan) -> str:
    head = ("workload", "Chronicle", "DBOS", "Chronicle/DBOS")
    rows = [
        (
            label.replace("500", str(plan.sleeps)),
            cell(dig(chronicle, *path), unit),
            cell(dig(dbos, *path), unit),
            ratio(dig(chronicle, *path), dig(dbos, *path), up),
        )
        for label, path, unit, up in ROWS
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    rule = "  ".join("-" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([*lines, rule])


def profile_text(chronicle: Json) -> str:
    lines: list[str] = []
    if chronicle.get("worker_profile"):
        lines.append("SDK worker, own time by function (cProfile):")
        lines += [
            f"  {r['own_share']:6.1%}  {r['function']}  calls={r['calls']}"
            for r in chronicle["worker_profile"]
        ]
    if chronicle.get("frontend_profile"):
        lines.append("one frontend process, samples by leaf frame (py-spy):")
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
    parser.add_argument("--systems", default="chronicle,dbos")
    parser.add_argument("--profile", action="store_true", help="profile the worker and a frontend process")
    for field, default in Plan().__dict__.items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=int, default=default)
    ns = parser.parse_args(argv)
    plan = Plan(**{k: getattr(ns, k) for k in Plan().__dict__})
    return ns, plan


def main(argv: list[str]) -> int:
    args, plan = parse(argv)
    RESULTS.mkdir(exist_ok=True)
    systems = {s.strip() for s in args.systems.split(",")}
    results: Json = {"plan": plan.__dict__}
    results["chronicle"] = (
        run_chronicle(args.database_url, plan, args.profile) if "chronicle" in systems else {}
    )
    results["dbos"] = run_dbos(args.database_url, plan) if "dbos" in systems else {}
    (RESULTS / "sdk_latest.json").write_text(json.dumps(results, indent=2) + "\n")
    print(table(results["chronicle"], results["dbos"], plan))
    if args.profile:
        print(profile_text(results["chronicle"]))
    log(f"wrote {(RESULTS / 'sdk_latest.json').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
