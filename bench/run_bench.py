#!/usr/bin/env python
"""Chronicle end-to-end benchmark.

Creates a scratch database, migrates it, boots gunicorn + the shard owner,
measures starts/s, workflow-task turnaround, activity dispatch latency, timer
lateness, events appended/s, and compares against a pgbench ceiling.

Usage: python bench/run_bench.py [--database-url URL] [--workflows N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse, urlunparse

import httpx
import psycopg
from bench_http import KeepAliveClient, Response
from proc_cpu import backend_pids, cpu_by_pid, cpu_used, process_tree

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from chronicle.launcher import ProcessGroup, ensure_secret_key, stack_processes

# The settings refuse to start without a key: every bench that imports these helpers (and
# every process it starts, with an environment copied from this one) signs with one made
# for the run.
ensure_secret_key()

Json = dict[str, Any]

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
LOG_DIR = BENCH_DIR / "results" / "logs"
THREADS = 8
NS = "bench"

TARGETS = {
    "activity_dispatch_p99_ms": 10.0,
    "wft_turnaround_p99_ms": 50.0,
    "timer_lateness_p99_ms": 50.0,
    "events_vs_pgbench_ratio": 0.5,
}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(p / 100.0 * (len(s) - 1))))
    return s[k]


def summary_ms(values_s: list[float]) -> Json:
    ms = [v * 1000.0 for v in values_s]
    return {"n": len(ms), "p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99), "max_ms": max(ms) if ms else None}


def with_db(url: str, db: str) -> str:
    u = urlparse(url)
    return urlunparse(u._replace(path="/" + db))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def python_exe() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def stop_process(proc: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    """SIGTERM (a worker then shuts down gracefully and writes its profile), SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def prepare_database(env: dict[str, str], namespace: str = NS, timeout: float = 300) -> str:
    """Migrate the scratch database in ``env`` and return an API key of ``namespace`` (every role).

    The namespace has no request rate limit, so the benches measure the engine, not the
    limiter; ``BENCH_REQUEST_RPS`` sets one (the namespace default is 2,400) to measure what
    the limiter adds to each call.
    """
    py = python_exe()
    request_rps = float(os.environ.get("BENCH_REQUEST_RPS", "0"))
    subprocess.run(
        [py, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=timeout
    )
    snippet = (
        "from namespaces.services import namespace_create, api_key_issue; "
        f'ns=namespace_create(name="{namespace}", request_rps={request_rps!r}); '
        'print(api_key_issue(namespace=ns, name="b", roles=["client","worker","admin"])[1])'
    )
    out = subprocess.run(
        [py, "manage.py", "shell", "-c", snippet],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return out.stdout.strip().splitlines()[-1].strip()


class Api:
    """The REST calls of the benches' load generators, under one namespace's key.

    POSTs (every call a phase times) go through the lean keep-alive client
    (``bench_http``), so the load generator takes as little of the machine from the stack
    as it can; ``client()`` is an httpx client for the occasional other call.
    """

    def __init__(self, base: str, key: str):
        self.base = base.rstrip("/") + f"/api/v1/namespaces/{NS}"
        self.headers = {"Authorization": f"Bearer {key}"}
        self._local = threading.local()
        self._lean = KeepAliveClient(self.base, self.headers)

    def client(self) -> httpx.Client:
        c = getattr(self._local, "c", None)
        if c is None:
            c = httpx.Client(headers=self.headers, timeout=httpx.Timeout(30.0))
            self._local.c = c
        return c

    def post(self, path: str, body: Json) -> Response:
        return self._lean.post(path, body)

    def start(self, wid: str, queue: str) -> Response:
        r = self.post("/workflows", {"workflow_id": wid, "workflow_type": "BenchWF", "task_queue": queue})
        if r.status_code != 201:
            raise RuntimeError(f"start {wid}: {r.status_code} {r.text[:300]}")
        return r

    def poll_wft(self, queue: str, timeout: float = 5.0) -> Json | None:
        r = self.post(f"/task-queues/{queue}/workflow-tasks/poll", {"identity": "bench", "timeout": timeout})
        if r.status_code == 204:
            return None
        if r.status_code != 200:
            raise RuntimeError(f"poll wft: {r.status_code} {r.text[:300]}")
        return cast(Json, r.json())

    def complete_wft(
        self, queue: str, token: str, commands: list[Json], *, return_new: bool = False
    ) -> Response:
        """Complete a workflow task; with ``return_new``, ask for the run's next task in the
        answer, as Temporal's workers do (``return_new_workflow_task``)."""
        body: Json = {"task_token": token, "commands": commands}
        if return_new:
            body["return_new_workflow_task"] = True
        r = self.post(f"/task-queues/{queue}/workflow-tasks/complete", body)
        if r.status_code >= 300:
            raise RuntimeError(f"complete wft: {r.status_code} {r.text[:300]}")
        return r

    def poll_act(self, queue: str, timeout: float = 5.0) -> Json | None:
        r = self.post(f"/task-queues/{queue}/activity-tasks/poll", {"identity": "bench", "timeout": timeout})
        if r.status_code == 204:
            return None
        if r.status_code != 200:
            raise RuntimeError(f"poll act: {r.status_code} {r.text[:300]}")
        return cast(Json, r.json())

    def complete_act(self, queue: str, token: str) -> Response:
        r = self.post(f"/task-queues/{queue}/activity-tasks/complete", {"task_token": token, "result": "ok"})
        if r.status_code >= 300:
            raise RuntimeError(f"complete act: {r.status_code} {r.text[:300]}")
        return r


def complete_cmd() -> Json:
    return {"command_type": "CompleteWorkflowExecution", "attributes": {"result": "done"}}


def drop_database(admin_url: str, dbname: str) -> None:
    """Drop the bench's scratch database; a failure is logged, not raised."""
    try:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        log(f"dropped database {dbname}")
    except Exception as exc:
        log(f"could not drop {dbname}: {exc}")


def count_events(dburl: str, event_type: str | None = None) -> int:
    """Rows in history_historyevent, all of them or those of one event type."""
    where, params = ("WHERE event_type = %s", [event_type]) if event_type else ("", [])
    with psycopg.connect(dburl, autocommit=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM history_historyevent {where}", params).fetchone()
        assert row is not None
        return int(row[0])


# --------------------------------------------------------------------------- phases


def phase_starts(api: Api, n: int) -> Json:
    log(f"phase 1: {n} starts across {THREADS} threads")
    errors: list[str] = []

    def one(i: int) -> bool:
        try:
            api.start(f"start-{i}", "q-starts")
            return True
        except Exception as exc:
            errors.append(str(exc)[:200])
            return False

    t0 = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as ex:
        ok = sum(ex.map(one, range(n)))
    el = time.perf_counter() - t0
    return {"n": n, "ok": ok, "failed": n - ok, "seconds": el, "starts_per_s": ok / el, "errors": errors[:5]}


def phase_wft(api: Api, iterations: int = 100, budget_s: float = 30.0) -> Json:
    log(f"phase 2: workflow-task turnaround ({iterations} iterations)")
    queue = "q-wft"
    turnaround, complete_lat = [], []
    deadline = time.perf_counter() + budget_s
    with ThreadPoolExecutor(1) as ex:
        for i in range(iterations):
            if time.perf_counter() > deadline:
                break
            holder: Json = {}

            def poller(holder: Json = holder) -> None:
                holder["task"] = api.poll_wft(queue, timeout=5)
                holder["t"] = time.perf_counter()

            fut = ex.submit(poller)
            time.sleep(0.03)  # let the poll reach the server and park
            api.start(f"wft-{i}", queue)
            t_start = time.perf_counter()
            fut.result(timeout=15)
            task = holder.get("task")
            if task is None:
                continue
            turnaround.append(holder["t"] - t_start)
            t0 = time.perf_counter()
            api.complete_wft(queue, task["task_token"], [complete_cmd()])
            complete_lat.append(time.perf_counter() - t0)
    return {"turnaround": summary_ms(turnaround), "complete_rtt": summary_ms(complete_lat)}


def phase_activity(api: Api, iterations: int = 100, budget_s: float = 40.0) -> Json:
    log(f"phase 3: activity dispatch latency ({iterations} iterations)")
    queue = "q-act"
    lat = []
    deadline = time.perf_counter() + budget_s
    with ThreadPoolExecutor(1) as ex:
        for i in range(iterations):
            if time.perf_counter() > deadline:
                break
            api.start(f"act-{i}", queue)
            task = api.poll_wft(queue, timeout=5)
            if task is None:
                continue
            holder: Json = {}

            def poller(holder: Json = holder) -> None:
                holder["task"] = api.poll_act(queue, timeout=5)
                holder["t"] = time.perf_counter()

            fut = ex.submit(poller)
            time.sleep(0.03)
            api.complete_wft(
                queue,
                task["task_token"],
                [
                    {
                        "command_type": "ScheduleActivityTask",
                        "attributes": {
                            "activity_id": "a1",
                            "activity_type": "BenchAct",
                            "start_to_close_timeout": 30,
                        },
                    }
                ],
            )
            t_done = time.perf_counter()
            fut.result(timeout=15)
            at = holder.get("task")
            if at is None:
                continue
            lat.append(holder["t"] - t_done)
            api.complete_act(queue, at["task_token"])
            # Finish the workflow so it doesn't linger.
            t2 = api.poll_wft(queue, timeout=5)
            if t2 is not None:
                api.complete_wft(queue, t2["task_token"], [complete_cmd()])
    return {"dispatch": summary_ms(lat)}


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _timer_due_times(events: list[Json]) -> dict[str, float]:
    """Each started timer's due time on the server clock: TimerStarted time + its timeout."""
    return {
        e["attributes"]["timer_id"]: _ts(e["event_time"]) + float(e["attributes"]["start_to_fire_timeout"])
        for e in events
        if e["event_type"] == "TimerStarted"
    }


def phase_timers(
    api: Api, dburl: str, stack: ProcessGroup, lead_s: float = 5.0, n_wf: int = 100, per_wf: int = 10
) -> Json:
    """1,000 timers due within one second, one every millisecond.

    Timer k (0..999) is due at T + k ms and belongs to workflow k // 10, so each of
    the 100 workflows owns 10 consecutive milliseconds. Lateness is measured per timer
    against its due time on the server clock (TimerStarted event time + timeout):
    to its TimerFired event time, and to the receipt of the first workflow task that
    carries that TimerFired.
    """
    total = n_wf * per_wf
    log(f"phase 4: {total} timers due within one second ({n_wf} workflows x {per_wf}, 1 ms apart)")
    queue = "q-timer"
    lock = threading.Lock()
    T: dict[str, float] = {"due": 0.0}
    seen: dict[str, set[str]] = {}
    task_lateness, fire_lateness, dispatch_delay = [], [], []
    first_done = [0]
    tasks_after_due = [0]
    stop = threading.Event()
    errors: list[str] = []

    def start_timers(wid: str, token: str) -> None:
        index = int(wid.rsplit("-", 1)[1])
        cmds = []
        for k in range(per_wf):
            due = T["due"] + (index * per_wf + k) / 1000.0
            cmds.append(
                {
                    "command_type": "StartTimer",
                    "attributes": {
                        "timer_id": f"t{k}",
                        "start_to_fire_timeout": max(0.001, due - time.time()),
                    },
                }
            )
        api.complete_wft(queue, token, cmds)
        with lock:
            first_done[0] += 1

    def record(wid: str, events: list[Json], recv: float) -> bool:
        due = _timer_due_times(events)
        with lock:
            s = seen.setdefault(wid, set())
            for e in events:
                timer_id = e["attributes"].get("timer_id")
                if e["event_type"] != "TimerFired" or timer_id in s or timer_id not in due:
                    continue
                s.add(timer_id)
                fired_at = _ts(e["event_time"])
                task_lateness.append(recv - due[timer_id])
                fire_lateness.append(fired_at - due[timer_id])
                dispatch_delay.append(recv - fired_at)
            return len(s) >= per_wf

    def worker() -> None:
        task: Json | None = None
        while not stop.is_set():
            if task is None:
                try:
                    task = api.poll_wft(queue, timeout=2)
                except Exception as exc:  # keep polling; report at the end
                    errors.append(str(exc)[:200])
                    time.sleep(0.1)
                    continue
            recv = time.time()
            if task is None:
                continue
            task = handle(task, recv)

    def handle(task: Json, recv: float) -> Json | None:
        """Answer one task; the run's next one when the answer hands it back (timers that
        fired while this one was out), as a worker's completion asks for it."""
        wid = task["workflow_execution"]["workflow_id"]
        events = task["history"]["events"]
        if not any(e["event_type"] == "TimerStarted" for e in events):
            start_timers(wid, task["task_token"])
            return None
        done = record(wid, events, recv)
        commands = [complete_cmd()] if done else []
        answer = api.complete_wft(queue, task["task_token"], commands, return_new=True)
        with lock:
            tasks_after_due[0] += 1
        following: Json | None = answer.json().get("workflow_task")  # whole history, as a poll's
        return following

    # Due time fixed up front so every command computes its delay against it.
    T["due"] = time.time() + lead_s + 2.0  # + time to start and hand out first tasks
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(THREADS)]
    for t in threads:
        t.start()
    with ThreadPoolExecutor(THREADS) as ex:
        list(ex.map(lambda i: api.start(f"timer-{i}", queue), range(n_wf)))
    setup_done = time.time()
    if setup_done > T["due"]:
        log(
            f"timer setup overran the due time by {setup_done - T['due']:.1f} s: lateness figures are invalid"
        )
    time.sleep(max(0.0, T["due"] - time.time()))
    meter = CpuMeter(stack, dburl)
    owner_pids = process_tree({stack.processes["shard_owner"].pid})
    owner0 = cpu_by_pid(owner_pids)
    hard_deadline = T["due"] + 20.0
    while time.time() < hard_deadline:
        with lock:
            fired_total = sum(len(v) for v in seen.values())
        if fired_total >= total:
            break
        time.sleep(0.1)
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=5)
    with lock:
        fired_total = sum(len(v) for v in seen.values())
    owner_cpu = cpu_used(owner0, cpu_by_pid(owner_pids))
    fired_by_owner = count_events(dburl, "TimerFired")
    return {
        "workflow_tasks_after_due": tasks_after_due[0],
        "cpu_per_workflow_task": meter.per_op_ms(tasks_after_due[0]),
        # The shard owner's own share (firing), apart from the frontends' polls and completions.
        "shard_owner_cpu_ms_per_timer": owner_cpu * 1000 / max(1, fired_by_owner),
        "timer_fired_events": fired_by_owner,
        "timers": total,
        "spread": "timer k due at T + k ms; workflow k // 10",
        "fired_seen": fired_total,
        "first_tasks_completed": first_done[0],
        "setup_margin_s": T["due"] - setup_done,
        "task_receive_lateness": summary_ms(task_lateness),
        "fire_event_lateness": summary_ms(fire_lateness),
        "fired_to_received": summary_ms(dispatch_delay),
        "errors": errors[:5],
    }


# --------------------------------------------------------------------------- CPU accounting


class CpuMeter:
    """CPU spent by the stack's processes, their PostgreSQL backends and this client."""

    def __init__(self, stack: ProcessGroup, dburl: str) -> None:
        self.dburl = dburl
        self.front = process_tree({p.pid for p in stack.processes.values()})
        self.pg = backend_pids(dburl)
        self.front0, self.pg0 = cpu_by_pid(self.front), cpu_by_pid(self.pg)
        self.client0 = time.process_time()

    def per_op_ms(self, ops: int) -> Json:
        server = cpu_used(self.front0, cpu_by_pid(self.front))
        pg = cpu_used(self.pg0, cpu_by_pid(self.pg | backend_pids(self.dburl)))
        client = time.process_time() - self.client0
        per = max(1, ops)
        return {
            "server_ms": server * 1000 / per,
            "postgres_ms": pg * 1000 / per,
            "client_ms": client * 1000 / per,
        }


def phase_signals(api: Api, dburl: str, n_wf: int, stack: ProcessGroup, seconds: float = 5.0) -> Json:
    """Signals from 8 threads; also the CPU each signal costs the server and PostgreSQL."""
    log(f"phase 5: signals for {seconds:.0f}s across {THREADS} threads")
    before = count_events(dburl)
    meter = CpuMeter(stack, dburl)
    sent = [0] * THREADS
    errs = [0] * THREADS
    end = time.perf_counter() + seconds

    def worker(t: int) -> None:
        ids = [f"start-{i}" for i in range(t, n_wf, THREADS)] or [f"start-{t}"]
        j = 0
        while time.perf_counter() < end:
            r = api.post(f"/workflows/{ids[j % len(ids)]}/signal", {"signal_name": "s"})
            if r.status_code < 300:
                sent[t] += 1
            else:
                errs[t] += 1
            j += 1

    el = run_in_threads(worker)
    cpu = meter.per_op_ms(sum(sent))
    after = count_events(dburl)
    return {
        "cpu_per_signal": cpu,
        "seconds": el,
        "signals": sum(sent),
        "errors": sum(errs),
        "signals_per_s": sum(sent) / el,
        "events": after - before,
        "events_per_s": (after - before) / el,
    }


FAN_OUT = 10


def run_in_threads(worker: Callable[[int], None]) -> float:
    """Run ``worker(t)`` on THREADS threads at once; the seconds until the last one ended."""
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - t0


def fan_out_cmds(n: int = FAN_OUT) -> list[Json]:
    return [
        {
            "command_type": "ScheduleActivityTask",
            "attributes": {"activity_id": f"a{k}", "activity_type": "BenchAct", "start_to_close_timeout": 30},
        }
        for k in range(n)
    ]


def phase_fan_out(api: Api, dburl: str, stack: ProcessGroup, seconds: float = 5.0) -> Json:
    """The mixed load: start, poll the workflow task, complete it scheduling ten activities.

    Each cycle is three API calls and appends 14 events (started, task scheduled, task
    started, task completed, ten activities scheduled), 11 of them in the completion's one
    transaction; every appended event counts, as in the signal phase.
    """
    log(f"phase 5b: fan-out cycles ({FAN_OUT} activities each) for {seconds:.0f}s across {THREADS} threads")
    before = count_events(dburl)
    meter = CpuMeter(stack, dburl)
    cycles = [0] * THREADS
    errors: list[str] = []
    end = time.perf_counter() + seconds

    def worker(t: int) -> None:
        queue = f"q-fan-{t}"
        j = 0
        while time.perf_counter() < end:
            try:
                api.start(f"fan-{t}-{j}", queue)
                task = api.poll_wft(queue)
                if task is None:
                    raise RuntimeError("no workflow task after the start")
                api.complete_wft(queue, task["task_token"], fan_out_cmds())
                cycles[t] += 1
            except Exception as exc:
                errors.append(str(exc)[:200])
            j += 1

    el = run_in_threads(worker)
    events = count_events(dburl) - before
    return {
        "cpu_per_event": meter.per_op_ms(events),
        "seconds": el,
        "cycles": sum(cycles),
        "api_calls": 3 * sum(cycles),
        "errors": errors[:5],
        "events": events,
        "events_per_s": events / el,
        "api_calls_per_s": 3 * sum(cycles) / el,
    }


def phase_pgbench(dburl: str) -> Json:
    log("phase 6: pgbench ceiling (10s)")
    exe = shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"
    if not Path(exe).exists():
        return {"error": "pgbench not found"}
    with psycopg.connect(dburl, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_event, bench_exec")
        conn.execute(
            "CREATE TABLE bench_event (id bigserial PRIMARY KEY, run_id uuid, "
            "event_id bigint, event_type text, event_time timestamptz, "
            "attributes jsonb)"
        )
        conn.execute("CREATE TABLE bench_exec (run_id int PRIMARY KEY, next_event_id bigint)")
        conn.execute("INSERT INTO bench_exec SELECT g, 1 FROM generate_series(1, 1000) g")
    seconds = 10
    cmd = [exe, "-n", "-c", "8", "-j", "2", "-T", str(seconds), "-f", str(BENCH_DIR / "pgbench_event.sql")]
    proc = subprocess.Popen([*cmd, dburl], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The backends exit with pgbench: read their CPU just before the end.
    time.sleep(seconds - 1.0)
    backends = cpu_by_pid(backend_pids(dburl, "pgbench"))
    client = cpu_by_pid(process_tree({proc.pid}))
    out, err = proc.communicate(timeout=60)
    m = re.search(r"tps = ([0-9.]+)", out)
    if proc.returncode != 0 or not m:
        return {"error": (err or out)[-500:]}
    tps = float(m.group(1))
    txns = tps * (seconds - 1.0)
    return {
        "tps": tps,
        "cpu_per_txn": {
            "postgres_ms": sum(backends.values()) * 1000 / txns,
            "client_ms": sum(client.values()) * 1000 / txns,
        },
    }


# --------------------------------------------------------------------------- main


def g(d: Any, *path: str) -> Any:
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "n/a"
    return f"{v:,.1f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def cpu_triple(costs: Json | None, *keys: str) -> str:
    if not costs:
        return "n/a"
    return " / ".join(f"{costs[k]:.2f}" for k in keys) + " ms"


def signal_cpu_ceiling(r: Json) -> float | None:
    """Signals/s this machine's cores could serve if the server and PostgreSQL had them all."""
    costs = g(r, "signals", "cpu_per_signal")
    if not costs:
        return None
    per_signal_s = (costs["server_ms"] + costs["postgres_ms"]) / 1000.0
    return (os.cpu_count() or 1) / per_signal_s if per_signal_s > 0 else None


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


def run_all_phases(
    results: Json,
    api: Api,
    dburl: str,
    stack: ProcessGroup,
    workflows: int,
    timer_lead: float,
    guarded: Callable[..., Json],
) -> None:
    """Phases 1-6 in order; the pgbench ceiling runs with the stack stopped."""
    ev0 = count_events(dburl)
    t13 = time.perf_counter()
    results["starts"] = guarded("starts", phase_starts, api, workflows)
    results["wft"] = guarded("wft", phase_wft, api)
    results["activity"] = guarded("activity", phase_activity, api)
    el13 = time.perf_counter() - t13
    ev13 = count_events(dburl) - ev0
    results["phases_1_3_events"] = {"events": ev13, "seconds": el13, "events_per_s": ev13 / el13}
    results["timers"] = guarded("timers", phase_timers, api, dburl, stack, timer_lead)
    results["signals"] = guarded("signals", phase_signals, api, dburl, workflows, stack)
    results["fan_out"] = guarded("fan_out", phase_fan_out, api, dburl, stack)
    stack.stop()  # measure the ceiling on an otherwise idle server
    results["pgbench"] = guarded("pgbench", phase_pgbench, dburl)


# Each phase that can run alone, called with (api, dburl, stack, args).
SINGLE_PHASES: dict[str, Callable[[Api, str, ProcessGroup, argparse.Namespace], Json]] = {
    "starts": lambda api, dburl, stack, args: phase_starts(api, args.workflows),
    "wft": lambda api, dburl, stack, args: phase_wft(api),
    "activity": lambda api, dburl, stack, args: phase_activity(api),
    "timers": lambda api, dburl, stack, args: phase_timers(api, dburl, stack, args.timer_lead),
    "signals": lambda api, dburl, stack, args: phase_signals(api, dburl, args.workflows, stack),
    "fan_out": lambda api, dburl, stack, args: phase_fan_out(api, dburl, stack),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432"),
        help="server URL; a fresh database is created on it",
    )
    ap.add_argument("--workflows", type=int, default=500, help="starts in phase 1")
    ap.add_argument(
        "--only",
        choices=sorted(SINGLE_PHASES),
        help="run one phase alone (no pgbench ceiling, so no ratios)",
    )
    ap.add_argument("--only-timers", action="store_true", help="the same as --only timers")
    ap.add_argument(
        "--timer-lead", type=float, default=5.0, help="seconds of setup before the timers fall due (+ 2)"
    )
    args = ap.parse_args()

    dbname = f"chronicle_bench_{secrets.token_hex(4)}"
    admin_url = with_db(args.database_url, "postgres")
    dburl = with_db(args.database_url, dbname)
    env = dict(os.environ, DATABASE_URL=dburl, CHRONICLE_LOG_LEVEL="WARNING", CHRONICLE_ACCESS_LOG="")
    py = python_exe()
    stack: ProcessGroup | None = None
    results: Json = {"database": dbname, "workflows": args.workflows, "cores": os.cpu_count()}
    results["load_average_before"] = os.getloadavg()
    t_run = time.perf_counter()

    log(f"creating database {dbname}")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        max_row = conn.execute("SHOW max_connections").fetchone()
        used_row = conn.execute("SELECT count(*) FROM pg_stat_activity").fetchone()
        assert max_row is not None and used_row is not None
        max_conn = int(max_row[0])
        used = int(used_row[0])
        conn.execute(f'CREATE DATABASE "{dbname}"')
    free_slots = max_conn - used
    results["pg_free_connection_slots"] = free_slots
    try:
        log("migrating")
        key = prepare_database(env)

        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log(f"starting the stack (gunicorn on :{port}, the shard owner); logs in {LOG_DIR}")
        stack = ProcessGroup(stack_processes(port, python=py), env=env, log_dir=LOG_DIR).start()
        stack.wait_http(base, timeout=60)
        api = Api(base, key)
        # Warm both gunicorn workers / connections a bit.
        for _ in range(8):
            api.post("/task-queues/warm/workflow-tasks/poll", {"identity": "w", "timeout": 0.01})

        def guarded(name: str, fn: Callable[..., Json], *a: Any) -> Json:
            try:
                return fn(*a)
            except Exception as exc:
                log(f"{name} failed: {exc!r}"[:400])
                return {"error": repr(exc)[:400]}

        only = "timers" if args.only_timers else args.only
        if only is not None:
            results[only] = guarded(only, SINGLE_PHASES[only], api, dburl, stack, args)
        else:
            run_all_phases(results, api, dburl, stack, args.workflows, args.timer_lead, guarded)
    finally:
        if stack is not None:
            stack.stop()
        if os.environ.get("BENCH_KEEP_DATABASES") == "1":  # to read the histories back
            log(f"kept database {dbname} (BENCH_KEEP_DATABASES=1)")
        else:
            drop_database(admin_url, dbname)
    results["total_seconds"] = time.perf_counter() - t_run
    results["load_average_after"] = os.getloadavg()
    for k in ("starts", "wft", "activity", "timers", "signals", "fan_out", "pgbench"):
        results.setdefault(k, {"error": "not run"})

    r = results
    tps = g(r, "pgbench", "tps")
    ev_s = g(r, "signals", "events_per_s")
    wft_p99 = g(r, "wft", "turnaround", "p99_ms")
    act_p99 = g(r, "activity", "dispatch", "p99_ms")
    tim_p99 = g(r, "timers", "task_receive_lateness", "p99_ms")
    ratio = ev_s / tps if (tps and ev_s is not None) else None
    checks = {
        "activity_dispatch_p99_ms": (act_p99, "< 10", None if act_p99 is None else act_p99 < 10),
        "wft_turnaround_p99_ms": (wft_p99, "< 50", None if wft_p99 is None else wft_p99 < 50),
        "timer_lateness_p99_ms": (tim_p99, "< 50", None if tim_p99 is None else tim_p99 < 50),
        "events_vs_pgbench_ratio": (ratio, ">= 0.5", None if ratio is None else ratio >= 0.5),
    }
    r["checks"] = {k: {"value": v, "target": t, "pass": ok} for k, (v, t, ok) in checks.items()}

    def pair(*path: str) -> str:
        return f"{fmt(g(r, *path, 'p50_ms'), ' ms')} / {fmt(g(r, *path, 'p99_ms'), ' ms')}"

    def vs(v: float | None) -> str:
        return f"{v / tps:.3f}x pgbench" if (tps and v is not None) else ""

    e13 = g(r, "phases_1_3_events", "events_per_s")
    fan_ev_s = g(r, "fan_out", "events_per_s")
    rows = [
        (
            "starts/s",
            fmt(g(r, "starts", "starts_per_s")),
            "",
            f"{g(r, 'starts', 'failed')} failed" if g(r, "starts", "failed") else "",
        ),
        (
            "WFT turnaround p50 / p99",
            pair("wft", "turnaround"),
            "p99 < 50 ms",
            verdict(checks["wft_turnaround_p99_ms"][2]),
        ),
        ("WFT complete RTT p50 / p99", pair("wft", "complete_rtt"), "", ""),
        (
            "activity dispatch p50 / p99",
            pair("activity", "dispatch"),
            "p99 < 10 ms",
            verdict(checks["activity_dispatch_p99_ms"][2]),
        ),
        (
            "timer lateness (task recv) p50 / p99",
            pair("timers", "task_receive_lateness"),
            "p99 < 50 ms",
            verdict(checks["timer_lateness_p99_ms"][2]),
        ),
        ("timer lateness (fire event) p50 / p99", pair("timers", "fire_event_lateness"), "", ""),
        ("timer fired -> task received p50 / p99", pair("timers", "fired_to_received"), "", ""),
        ("timers fired / expected", f"{g(r, 'timers', 'fired_seen')} / {g(r, 'timers', 'timers')}", "", ""),
        ("timer setup margin before the due time", fmt(g(r, "timers", "setup_margin_s"), " s"), "> 0 s", ""),
        ("workflow tasks for the timers", fmt(g(r, "timers", "workflow_tasks_after_due")), "", ""),
        (
            "CPU per timer workflow task: server / PostgreSQL / client",
            cpu_triple(g(r, "timers", "cpu_per_workflow_task"), "server_ms", "postgres_ms", "client_ms"),
            "",
            "",
        ),
        (
            "shard-owner CPU per fired timer",
            fmt(g(r, "timers", "shard_owner_cpu_ms_per_timer"), "ms"),
            "",
            "",
        ),
        ("events/s (phases 1-3)", fmt(e13), "", vs(e13)),
        ("signals/s", fmt(g(r, "signals", "signals_per_s")), "", ""),
        (
            "events/s (signal phase)",
            fmt(ev_s),
            ">= 0.5 x pgbench",
            (vs(ev_s) + " " if ratio is not None else "") + verdict(checks["events_vs_pgbench_ratio"][2]),
        ),
        ("events/s (fan-out mix)", fmt(fan_ev_s), "", vs(fan_ev_s)),
        ("API calls/s (fan-out mix)", fmt(g(r, "fan_out", "api_calls_per_s")), "", ""),
        (
            "CPU per fan-out event: server / PostgreSQL / client",
            cpu_triple(g(r, "fan_out", "cpu_per_event"), "server_ms", "postgres_ms", "client_ms"),
            "",
            "",
        ),
        ("pgbench tps (ceiling)", fmt(tps) if tps else str(g(r, "pgbench", "error"))[:60], "", ""),
        (
            "CPU per signal: server / PostgreSQL / client",
            cpu_triple(g(r, "signals", "cpu_per_signal"), "server_ms", "postgres_ms", "client_ms"),
            "",
            "",
        ),
        (
            "CPU per pgbench txn: PostgreSQL / pgbench",
            cpu_triple(g(r, "pgbench", "cpu_per_txn"), "postgres_ms", "client_ms"),
            "",
            "",
        ),
        ("CPU-bound signals/s on this machine", fmt(signal_cpu_ceiling(r)), "", ""),
    ]
    w = [max(len(x[i]) for x in [*rows, ("metric", "value", "target", "result")]) for i in range(4)]
    line = "  ".join("-" * n for n in w)
    print(line)
    print("  ".join(h.ljust(n) for h, n in zip(("metric", "value", "target", "result"), w, strict=False)))
    print(line)
    for row in rows:
        print("  ".join(c.ljust(n) for c, n in zip(row, w, strict=False)))
    print(line)
    print(f"total runtime {results['total_seconds']:.0f}s on {results['cores']} cores")
    before, after = results["load_average_before"], results["load_average_after"]
    print(f"load average (1 min) before {before[0]:.2f}, after {after[0]:.2f}")

    out_dir = BENCH_DIR / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "latest.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    log(f"wrote {out_dir.relative_to(ROOT) / 'latest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
