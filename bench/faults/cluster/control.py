"""The running cluster as the fault run drives it: ``cluster.sh``, the monitor, the database,
the harness's own workers on the worker host, and a probe of the service through HAProxy.

Everything acts through ``platform/cluster/cluster.sh`` (``kill``, ``restart``, ``cut``,
``heal``, ``manage``) or reads: the pg_auto_failover monitor for the data nodes' states,
the Chronicle database for shard leases. The harness runs on this machine, outside the
hosts, and reaches them over the bridge as any client would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "platform" / "cluster" / "cluster.sh"
STATE = Path(os.environ.get("CHRONICLE_CLUSTER_DIR", ROOT / ".chronicle" / "cluster"))
# The cluster's own addresses and settings (cluster.sh): its database URL names both data
# nodes, and its shard owners run with the default lease.
DATABASE_URL = "postgres://chronicle@10.77.0.11,10.77.0.12:5432/chronicle?target_session_attrs=read-write&connect_timeout=3"
MONITOR_URL = "postgres://autoctl_node@10.77.0.10:5432/pg_auto_failover?connect_timeout=3"
DATA_NODES = ("pg1", "pg2")
FRONTENDS = {"fe1": "http://10.77.0.21:7243", "fe2": "http://10.77.0.22:7243"}
OWNERS = ("so1", "so2")
WORKER_HOST = "wk1"
LEASE_SECONDS = 10.0
HARNESS_WORKERS = 2
PROBE_QUEUE = "cluster-faults-probe"  # a queue nobody polls: the probe's starts only write


def log(message: str) -> None:
    print(f"[cluster faults {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def script(*args: str, timeout: float = 300.0) -> str:
    """``cluster.sh ARGS``; its output, or a RuntimeError with it."""
    done = subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"cluster.sh {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def sql(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One autocommit statement on a connection of its own (the last one may be cut off)."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5, application_name="cluster-faults") as conn:
        cur = conn.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


def node_states() -> dict[str, str]:
    """Each data node's state as the monitor has it: its reported state, or ``goal->reported``
    while the two differ (a node on its way somewhere)."""
    rows = sql(MONITOR_URL, "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node")
    return {str(n): str(r) if r == g else f"{g}->{r}" for n, r, g in rows}


def primary() -> str:
    """The data node that is primary now ('' while there is none)."""
    states = node_states()
    return next((n for n, s in states.items() if s in ("primary", "wait_primary", "single")), "")


def db_now() -> float:
    """The database's clock (epoch seconds): lease times are written with it."""
    return float(sql(DATABASE_URL, "SELECT extract(epoch FROM now())::float8")[0][0])


def shards() -> dict[int, tuple[str, int, float]]:
    """shard -> (owner, range_id, lease expiry in epoch seconds, 0 when none)."""
    rows = sql(
        DATABASE_URL,
        "SELECT shard_id, owner, range_id, coalesce(extract(epoch FROM lease_expires_at)::float8, 0)"
        " FROM history_shard",
    )
    return {int(s): (str(o), int(r), float(e)) for s, o, r, e in rows}


def timers_due_soon() -> int:
    rows = sql(DATABASE_URL, "SELECT count(*) FROM history_timertask WHERE fire_at < now() + interval '2 s'")
    return int(rows[0][0])


def established(host: str, port: int = 7243) -> int:
    """Client connections ``host`` holds on ``port`` now (its in-flight requests, long-polls)."""
    command = [
        "ip",
        "netns",
        "exec",
        f"chr-{host}",
        "ss",
        "-Htn",
        "state",
        "established",
        f"( sport = :{port} )",
    ]
    listing = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    return len(listing.splitlines())


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


def host_alive(host: str) -> bool:
    listing = subprocess.run(
        ["ip", "netns", "pids", f"chr-{host}"], capture_output=True, text=True, check=False
    )
    return bool(listing.stdout.strip())


def manage(*args: str) -> str:
    """A manage.py command on fe1, in the cluster's environment."""
    return script("manage", "fe1", *args, timeout=120)


def make_namespace(name: str) -> str:
    """Create ``name`` and return an API key with every role on it."""
    manage("namespace", "create", name, "--reason", "cluster fault run")
    out = manage(
        "api_key",
        "create",
        "-n",
        name,
        "--name",
        "faults",
        "--role",
        "client",
        "--role",
        "worker",
        "--role",
        "admin",
        "--json",
    )
    return str(json.loads(out[out.index("{") :])["api_key"])


@dataclass
class Workers:
    """The harness's SDK workers (``bench.faults.workflows``), run on the worker host beside its
    demo worker, so that killing the host kills them too."""

    url: str
    namespace: str
    key: str
    queue: str
    effects: Path
    log_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> None:
        env = [
            f"CHRONICLE_URL={self.url}",
            f"CHRONICLE_NAMESPACE={self.namespace}",
            f"CHRONICLE_API_KEY={self.key}",
            f"TASK_QUEUE={self.queue}",
            f"FAULTS_EFFECTS={self.effects}",
            f"PYTHONPATH={ROOT}",
        ]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for n in range(HARNESS_WORKERS):
            with (self.log_dir / f"worker-{n}.log").open("ab") as out:
                command = ["ip", "netns", "exec", f"chr-{WORKER_HOST}", "env", *env]
                command += [sys.executable, "-m", "bench.faults.workflows"]
                self.processes.append(
                    subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=out, start_new_session=True)
                )

    def pids(self) -> set[int]:
        return {p.pid for p in self.processes if p.poll() is None}

    def reap(self) -> None:
        """Wait for the killed ones (the host kill took them) and forget them."""
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=15)
        self.processes = [p for p in self.processes if p.poll() is None]

    def alive(self) -> bool:
        return len(self.pids()) == HARNESS_WORKERS

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self.processes = []


class Probe:
    """A write through HAProxy every quarter second, never retried: when the service answers.

    Each probe starts a run in the cluster's own namespace (not the fault run's, which the
    checker reads in full) on a queue nobody polls, with a request id, and records when the
    answer came and its status. The gaps between successful answers are the time the
    service stood still.
    """

    INTERVAL = 0.25

    def __init__(self, url: str, namespace: str, key: str, record: Path) -> None:
        self.base = f"{url}/api/v1/namespaces/{namespace}"
        self.headers = {"Authorization": f"Bearer {key}"}
        self.answers: list[tuple[float, bool]] = []  # (when the answer came, 2xx)
        self.record = record  # one line per answer: sent, answered, status

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(base_url=self.base, headers=self.headers, timeout=5.0) as client:
            with self.record.open("a", encoding="utf-8") as out:
                while not stop.is_set():
                    wid = f"probe-{uuid.uuid4().hex[:12]}"
                    body = {
                        "workflow_id": wid,
                        "workflow_type": "Probe",
                        "task_queue": PROBE_QUEUE,
                        "request_id": wid,
                    }
                    sent = time.time()
                    try:
                        status: int | str = (await client.post("/workflows", json=body)).status_code
                    except httpx.HTTPError as exc:
                        status = type(exc).__name__
                    answered = time.time()
                    self.answers.append((answered, isinstance(status, int) and status < 300))
                    out.write(json.dumps([round(sent, 3), round(answered, 3), status]) + "\n")
                    await asyncio.sleep(self.INTERVAL)

    def first_ok_after(self, moment: float) -> float | None:
        return next((t for t, ok in self.answers if ok and t >= moment), None)

    async def wait_ok_after(self, moment: float, within: float) -> float | None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = self.first_ok_after(moment)
            if found is not None:
                return found
            await asyncio.sleep(0.25)
        return None
