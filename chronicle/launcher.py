"""One way to run the Chronicle stack's processes: the frontend, shard owners and extras.

``start_dev``, the benchmark and the test suite's ``stack`` fixture all start the same
processes the same way, so what they measure and test is what a developer runs. The
stack is a list of named commands (:func:`stack_processes`); a new kind of process is
one more :class:`ProcessSpec` in that list. :class:`ProcessGroup` starts them, waits
until the frontend answers, notices a child that died, and stops them all: SIGTERM
first, SIGKILL for any that have not exited within the grace period.

This module imports no Django: the benchmark uses it from outside the project.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
GUNICORN_CONFIG = ROOT / "platform" / "gunicorn.conf.py"
STOP_GRACE_SECONDS = 10.0
READY_PATH = "/api/schema/"
PRODUCTION_APP = "chronicle.asgi:application"
# The same application, serving static files and leaving long-polls out of the access log.
DEV_APP = "chronicle.dev_asgi:application"


def ensure_secret_key(environ: MutableMapping[str, str] = os.environ) -> str:
    """Set ``SECRET_KEY`` in ``environ`` to a random key made for this run, unless one is
    set, and return the key in use.

    The settings refuse to start without a key (DEBUG off). A run that starts Chronicle
    for itself (the test suite, a benchmark) calls this before Django reads its settings:
    every process it then starts inherits the environment, so all of them sign with the
    same key, one nobody else knows and nobody needs to keep.
    """
    if not environ.get("SECRET_KEY"):  # an empty one counts as none, as in the settings
        environ["SECRET_KEY"] = secrets.token_urlsafe(50)
    return environ["SECRET_KEY"]


@dataclass(frozen=True)
class ProcessSpec:
    """A named command of the stack; ``name`` labels its output and its log file."""

    name: str
    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)


def frontend_process(
    port: int, *, python: str = sys.executable, workers: int | None = None, app: str = PRODUCTION_APP
) -> ProcessSpec:
    """Gunicorn with uvicorn workers on 127.0.0.1:``port``, configured by platform/gunicorn.conf.py.

    ``app`` is the ASGI application; ``start_dev`` passes :data:`DEV_APP`.
    """
    argv = [python, "-m", "gunicorn", app, "-c", str(GUNICORN_CONFIG)]
    argv += ["-b", f"127.0.0.1:{port}"]
    if workers is not None:
        argv += ["-w", str(workers)]
    return ProcessSpec("frontend", argv)


def shard_owner_process(owner: str | None = None, *, python: str = sys.executable) -> ProcessSpec:
    """One shard-owner daemon; ``owner`` names it in the shard table (default: host:pid)."""
    argv = [python, "manage.py", "run_shard_owner"]
    if owner:
        argv += ["--owner", owner]
    return ProcessSpec(f"shard_owner:{owner}" if owner else "shard_owner", argv)


def batch_runner_process(
    owner: str | None = None, *, python: str = sys.executable, lease_seconds: float | None = None
) -> ProcessSpec:
    """One batch-job runner (reset, terminate, cancel, signal in bulk)."""
    argv = [python, "manage.py", "run_batch_jobs"]
    if owner:
        argv += ["--owner", owner]
    if lease_seconds is not None:
        argv += ["--lease-seconds", str(lease_seconds)]
    return ProcessSpec(f"batch_runner:{owner}" if owner else "batch_runner", argv)


def stack_processes(
    port: int,
    *,
    python: str = sys.executable,
    owner: str | None = None,
    extra: Iterable[ProcessSpec] = (),
    app: str = PRODUCTION_APP,
) -> list[ProcessSpec]:
    """The processes of a whole stack: frontend, shard owner, batch runner, then ``extra``."""
    return [
        frontend_process(port, python=python, app=app),
        shard_owner_process(owner, python=python),
        batch_runner_process(python=python),
        *extra,
    ]


class ProcessExited(RuntimeError):
    """A child of the group exited while it was expected to run."""


class ProcessGroup:
    """Start, watch and stop a set of named child processes together.

    Output goes, per process, to ``<log_dir>/<name>.log`` when ``log_dir`` is given;
    otherwise each line is copied to this process's stdout behind a ``name |`` prefix.
    """

    def __init__(
        self,
        specs: Iterable[ProcessSpec],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = ROOT,
        log_dir: Path | None = None,
        grace_seconds: float = STOP_GRACE_SECONDS,
    ) -> None:
        self.specs = list(specs)
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self.log_dir = log_dir
        self.grace_seconds = grace_seconds
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._files: list[IO[bytes]] = []
        self._pumps: list[threading.Thread] = []

    # -- starting -----------------------------------------------------------------
    def start(self) -> ProcessGroup:
        for spec in self.specs:
            self._spawn(spec)
        return self

    def add(self, spec: ProcessSpec) -> subprocess.Popen[bytes]:
        """Start one more process in the group; it is stopped with the others."""
        self.specs.append(spec)
        return self._spawn(spec)

    def _spawn(self, spec: ProcessSpec) -> subprocess.Popen[bytes]:
        if spec.name in self.processes and self.processes[spec.name].poll() is None:
            raise ValueError(f"a process named {spec.name!r} is already running")
        env = {**self.env, "PYTHONUNBUFFERED": "1", **spec.env}
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log_file = open(self.log_dir / f"{_file_name(spec.name)}.log", "ab")  # noqa: SIM115
            self._files.append(log_file)
            proc = subprocess.Popen(
                spec.argv, cwd=self.cwd, env=env, stdout=log_file, stderr=log_file, start_new_session=True
            )
        else:
            proc = subprocess.Popen(
                spec.argv,
                cwd=self.cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self._pump(spec.name, proc)
        self.processes[spec.name] = proc
        return proc

    def _pump(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        """Copy a child's output to stdout line by line, each behind its name."""
        assert proc.stdout is not None
        stream = proc.stdout
        prefix = f"{name} | ".encode()

        def copy() -> None:
            for line in stream:
                sys.stdout.buffer.write(prefix + line)
                sys.stdout.buffer.flush()

        thread = threading.Thread(target=copy, name=f"output-{name}", daemon=True)
        thread.start()
        self._pumps.append(thread)

    # -- watching -----------------------------------------------------------------
    def exited(self) -> tuple[str, int] | None:
        """The first child found to have exited, with its return code; None if all run."""
        for name, proc in self.processes.items():
            code = proc.poll()
            if code is not None:
                return name, code
        return None

    def check_running(self) -> None:
        gone = self.exited()
        if gone is not None:
            raise ProcessExited(f"{gone[0]} exited with code {gone[1]}{self._log_hint(gone[0])}")

    def wait_http(self, url: str, *, timeout: float = 60.0) -> None:
        """Wait until ``url`` + the schema path answers 200; fail early if a child dies."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_running()
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url.rstrip("/") + READY_PATH, timeout=2) as reply,
            ):
                if reply.status == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")
            time.sleep(0.1)

    def _log_hint(self, name: str) -> str:
        if self.log_dir is None:
            return ""
        return f" (see {self.log_dir / _file_name(name)}.log)"

    # -- stopping -----------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM every running child, then SIGKILL those still alive after the grace period.

        Each child leads its own process group (so a terminal's Ctrl-C reaches only the
        supervisor, which stops the children in order); the SIGKILL goes to the whole
        group, so a gunicorn master's workers cannot outlive it.
        """
        for proc in self.processes.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        deadline = time.monotonic() + self.grace_seconds
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for thread in self._pumps:
            thread.join(timeout=1.0)
        for log_file in self._files:
            log_file.close()
        self._files.clear()

    def __enter__(self) -> ProcessGroup:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _file_name(name: str) -> str:
    return name.replace(":", "-").replace("/", "-")


__all__ = [
    "ProcessExited",
    "ProcessGroup",
    "ProcessSpec",
    "batch_runner_process",
    "ensure_secret_key",
    "frontend_process",
    "shard_owner_process",
    "stack_processes",
]
