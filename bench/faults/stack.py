"""The harness's own stack: a database of its own, two shard owners, a frontend, two SDK workers.

The database is either a throwaway PostgreSQL cluster under the run directory (as root,
with the server binaries at hand: then the nemesis may also restart PostgreSQL) or a
scratch database on a shared server, dropped at the end. Every process is started by
:class:`chronicle.launcher.ProcessGroup` in its own session, its pid recorded; faults act
on recorded pids only, and gunicorn's workers are found as the children of its master.
Pools stay small (``CHRONICLE_DB_POOL_MAX=4``): the shared server has 100 connections.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import psycopg

from chronicle.launcher import (
    ProcessGroup,
    ProcessSpec,
    ensure_secret_key,
    frontend_process,
    shard_owner_process,
)

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "faults"
TASK_QUEUE = "faults-q"
# The bad deploy's queue: one worker of its own, restarted with the reordered FaultsMixed.
DEPLOY_QUEUE = "faults-deploy-q"
DEPLOY_WORKER = "faults-deploy-worker"
# Each role's connections are named, so a fault can end one role's and count them.
FRONTEND_APP = "faults-frontend"
LEASE_SECONDS = 3.0
OWNERS = ("faults-owner-a", "faults-owner-b")
WORKERS = ("faults-worker-1", "faults-worker-2")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
# libfaketime (Debian's ``faketime`` package): preloaded in one shard owner when asked, its
# offset read from a file on every call, so the nemesis can jump that process's clock.
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
CLOCK_OWNER = OWNERS[1]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def with_db(url: str, name: str) -> str:
    parts = urlparse(url)
    return urlunparse(parts._replace(path=f"/{name}"))


def private_cluster_unavailable() -> str | None:
    """Why a throwaway cluster cannot be made here (None when it can)."""
    if os.geteuid() != 0:
        return "not root: initdb must run as the postgres user"
    if not (PG_BIN / "initdb").exists() or shutil.which("su") is None:
        return f"no PostgreSQL server binaries at {PG_BIN}"
    return None


@dataclass
class Cluster:
    """A PostgreSQL cluster of the run's own on a free port: crashing it harms nobody else."""

    run_dir: Path
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.run_dir / "pg"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *argv: str) -> None:
        command = " ".join(f"'{a}'" for a in argv)
        subprocess.run(["su", "postgres", "-c", command], check=True, capture_output=True, timeout=120)

    def create(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.run_dir, "postgres")
        self._as_postgres(str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self.start()

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.run_dir} -c max_connections=80"
        self._as_postgres(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.run_dir / "pg.log"),
            "-w",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def crash_and_restart(self, down_seconds: float) -> None:
        """``-m immediate``: no checkpoint, every session cut; the start replays the WAL."""
        self.stop("immediate")
        time.sleep(down_seconds)
        self.start()


def create_database(server_url: str, name: str) -> str:
    with psycopg.connect(with_db(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_db(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(with_db(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def prepare(env: dict[str, str]) -> str:
    """Migrate the database in ``env``; make the namespace and return a key with every role."""
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300)
    snippet = (
        "from namespaces.services import namespace_create, api_key_issue; "
        f'ns=namespace_create(name="{NAMESPACE}", request_rps=0); '
        'print(api_key_issue(namespace=ns, name="faults", roles=["client","worker","admin"])[1])'
    )
    out = subprocess.run(
        [*manage, "shell", "-c", snippet],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1].strip()


class Stack:
    """The processes under test and the handles the nemesis needs on them."""

    def __init__(
        self, db_url: str, run_dir: Path, *, planted_bug: float = 0.0, fake_clock: bool = False
    ) -> None:
        self.db_url = db_url
        self.run_dir = run_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        ensure_secret_key(env)
        env.update(
            DATABASE_URL=db_url,
            CHRONICLE_DB_POOL_MAX="4",
            CHRONICLE_DB_POOL_MIN="1",
            CHRONICLE_DB_POOL_TIMEOUT="5",
            CHRONICLE_SHARDS="8",
            CHRONICLE_SHARD_LEASE_SECONDS=str(LEASE_SECONDS),
            CHRONICLE_WEB_CONCURRENCY="2",
            CHRONICLE_LOG_LEVEL="WARNING",
            CHRONICLE_ACCESS_LOG="",
            PYTHONPATH=str(ROOT),
        )
        env.pop("CHRONICLE_FAULTS_ANSWER_BEFORE_COMMIT", None)
        if planted_bug:
            env["CHRONICLE_FAULTS_ANSWER_BEFORE_COMMIT"] = str(planted_bug)
        self.env = env
        self.key = ""
        self.effects = run_dir / "effects.jsonl"
        self.group = ProcessGroup([], env=env, log_dir=run_dir / "logs", grace_seconds=5)
        self.specs: dict[str, ProcessSpec] = {}
        # The offset file of the shard owner run under libfaketime (None: real clocks only).
        self.clock_file: Path | None = run_dir / "owner-clock" if fake_clock else None
        self.clock_restarts = 0  # start-ups of the faked owner that failed (see until_up)

    def start(self) -> None:
        self.key = prepare(self.env)
        worker_env = {
            "CHRONICLE_URL": self.url,
            "CHRONICLE_NAMESPACE": NAMESPACE,
            "CHRONICLE_API_KEY": self.key,
            "TASK_QUEUE": TASK_QUEUE,
            "FAULTS_EFFECTS": str(self.effects),
        }
        frontend = frontend_process(self.port)
        frontend = dataclasses.replace(
            frontend, env={**frontend.env, "CHRONICLE_DB_APPLICATION_NAME": FRONTEND_APP}
        )
        owners = [shard_owner_process(o) for o in OWNERS]
        owners = [
            dataclasses.replace(o, env={**o.env, "CHRONICLE_DB_APPLICATION_NAME": n})
            for o, n in zip(owners, OWNERS, strict=True)
        ]
        if self.clock_file is not None:
            self.set_clock("+0s")
            faked = {
                "LD_PRELOAD": str(FAKETIME_LIB),
                "FAKETIME_TIMESTAMP_FILE": str(self.clock_file),
                "FAKETIME_NO_CACHE": "1",
                # psycopg's compiled connect times out at once under libfaketime (its clock
                # and the faked one disagree); the pure-Python one keeps to the faked clock.
                "PSYCOPG_IMPL": "python",
            }
            owners[1] = dataclasses.replace(owners[1], env={**owners[1].env, **faked})
        # The faked owner starts once the rest is up (its start may need retries: until_up).
        later = owners[1:] if self.clock_file is not None else []
        specs = [frontend, *(o for o in owners if o not in later)]
        specs += [
            ProcessSpec(w, [sys.executable, "-m", "bench.faults.workflows"], worker_env) for w in WORKERS
        ]
        deploy_env = {**worker_env, "TASK_QUEUE": DEPLOY_QUEUE, "FAULTS_VARIANT": ""}
        specs.append(ProcessSpec(DEPLOY_WORKER, [sys.executable, "-m", "bench.faults.workflows"], deploy_env))
        for spec in specs:
            self.specs[spec.name] = spec
            self.group.add(spec)
        self.group.wait_http(self.url, timeout=60)
        for spec in later:
            self.specs[spec.name] = spec
            self.group.add(spec)
            self.until_up(spec.name)

    def pid(self, name: str) -> int:
        return self.group.processes[self.process_name(name)].pid

    @staticmethod
    def process_name(name: str) -> str:
        """The launcher's name for a process: a shard owner is listed as ``shard_owner:<owner>``."""
        return f"shard_owner:{name}" if name in OWNERS else name

    def restart(self, name: str) -> None:
        """Start ``name`` again once its killed process is reaped."""
        name = self.process_name(name)
        self.group.processes[name].wait(timeout=30)
        self.group.add(self.specs[name])
        if self.clock_file is not None and name == self.process_name(CLOCK_OWNER):
            self.until_up(name)

    def until_up(self, name: str, attempts: int = 10) -> None:
        """Start the faked owner again until it passes its start-up check. Under libfaketime
        psycopg's connect with a short ``connect_timeout`` often fails at once ("connection
        timeout expired": the faked monotonic clock reads as the epoch), and the daemon's
        reachability check at start uses one: a harness limit, not the fault under test."""
        for _ in range(attempts):
            time.sleep(3.0)
            if self.group.processes[name].poll() is None:
                return
            self.clock_restarts += 1
            self.group.add(self.specs[name])

    def set_clock(self, offset: str) -> None:
        """Move the faked owner's clock (wall and monotonic) to real time plus ``offset``,
        libfaketime's relative form (``+20s``, ``-5s``), from its next reading on."""
        assert self.clock_file is not None
        self.clock_file.write_text(f"{offset}\n")

    def redeploy(self, variant: str) -> None:
        """Replace the deploy queue's worker by one running ``variant`` of the workflows (a
        deploy: the old process is killed, its cache and sticky queue gone with it)."""
        process = self.group.processes[DEPLOY_WORKER]
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        spec = self.specs[DEPLOY_WORKER]
        self.specs[DEPLOY_WORKER] = dataclasses.replace(spec, env={**spec.env, "FAULTS_VARIANT": variant})
        self.group.add(self.specs[DEPLOY_WORKER])

    def frontend_workers(self) -> list[int]:
        """Gunicorn's worker pids: the children of the recorded master."""
        master = self.pid("frontend")
        children = Path(f"/proc/{master}/task/{master}/children")
        try:
            return [int(p) for p in children.read_text().split()]
        except OSError:
            return []

    def stop(self) -> None:
        self.group.stop()


def run_name(seed: int) -> str:
    return f"faults_{seed}_{secrets.token_hex(3)}"
