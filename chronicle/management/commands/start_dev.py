"""``manage.py start_dev``: one command that runs a whole development Chronicle.

It checks that its port is free before anything starts, migrates the database,
bootstraps the ``default`` namespace with an API key and a UI user (reusing them on
later runs via ``.chronicle/dev.json``), then supervises the child processes: the ASGI
frontend under gunicorn (serving the admin's static files, long-polls left out of its
access log: :mod:`chronicle.dev_asgi`), one shard owner daemon, the batch-job runner
and, when present, the demo worker of the SDK.

The children are the stack of :mod:`chronicle.launcher`. Ctrl-C or SIGTERM stops
every child (SIGTERM, wait up to 10 s, then SIGKILL) and exits 0. If a child exits
on its own the others are stopped and the command exits non-zero. Either way the
embedded PostgreSQL (no ``DATABASE_URL``) is stopped too, unless another process (a
``make test`` beside it) still uses it: Ctrl-C leaves nothing of the stack running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from chronicle.db import listen_conninfo, require_reachable_database
from chronicle.embedded_postgres import KEPT, settings_database_url, stop_if_unused
from chronicle.launcher import DEV_APP, ProcessGroup, ProcessSpec, stack_processes

DEFAULT_PORT = 7243
STOP_TIMEOUT_SECONDS = 10.0
HOST = "127.0.0.1"


class _Stop(Exception):
    """Raised from the signal handler to leave the supervision loop."""


def database_url_from_settings(db: dict[str, Any]) -> str:
    """Rebuild a django-environ compatible URL from a ``DATABASES`` entry."""
    try:
        return settings_database_url(db)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def port_problem(port: int, host: str = HOST) -> str | None:
    """Why ``host:port`` cannot be served (None when it can), found by binding it.

    SO_REUSEADDR as gunicorn sets it, so a port whose last connections linger in
    TIME_WAIT counts as free, as it is for gunicorn.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def close_database_connections() -> None:
    """Close this process's connections, its pool's included, so it holds no session."""
    for conn in connections.all(initialized_only=True):
        conn.close()
        close_pool = getattr(conn, "close_pool", None)
        if close_pool is not None:
            close_pool()


class Command(BaseCommand):
    help = "Run a development Chronicle: migrate, bootstrap, start frontend, shard owner and batch runner."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})"
        )
        parser.add_argument(
            "--no-demo-worker",
            action="store_true",
            help="Do not start chronicle/demo_worker.py even if it exists.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        port: int = options["port"]
        problem = port_problem(port)
        if problem is not None:
            self._stop_embedded_database(quiet_if_kept=True)
            raise CommandError(
                f"port {port} on {HOST} is not free ({problem}): is another `make run` going? "
                f"Stop it, or choose another port: manage.py start_dev --port {port + 1}"
            )
        # This process queries a handful of times (migrate, bootstrap), then only supervises:
        # a connection pool would keep sessions open the whole time, and could even open one
        # after it is closed (its workers refill it in the background), while stopping the
        # embedded server on Ctrl-C counts the sessions left to know no one else uses it.
        connections["default"].settings_dict["OPTIONS"].pop("pool", None)
        stopping = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            code = self._run(port, no_demo_worker=options["no_demo_worker"])
        except _Stop:
            self.stdout.write("stopped before the stack started")
            code = 0
        finally:
            for sig in stopping:  # a second Ctrl-C must not cut the shutdown short
                signal.signal(sig, signal.SIG_IGN)
            self._stop_embedded_database()
            for sig, handler in stopping.items():
                signal.signal(sig, handler)
        if code != 0:
            sys.exit(code)

    @staticmethod
    def _on_signal(signum: int, frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    def _run(self, port: int, *, no_demo_worker: bool) -> int:
        base_dir = Path(settings.BASE_DIR)
        state_dir = Path(settings.CHRONICLE_STATE_DIR)
        state_dir.mkdir(parents=True, exist_ok=True)
        dev_json = state_dir / "dev.json"

        require_reachable_database()
        call_command("migrate", interactive=False, verbosity=1)

        from namespaces.services import bootstrap_dev_namespace

        existing = self._read_existing(dev_json)
        boot = bootstrap_dev_namespace(existing=existing)
        url = f"http://{HOST}:{port}"
        info = {
            "url": url,
            "namespace": boot["namespace"],
            "api_key": boot["api_key"],
            "ui_url": f"{url}/",
            "ui_user": boot["ui_user"],
            "ui_password": boot["ui_password"],
        }
        dev_json.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        with contextlib.suppress(OSError):
            dev_json.chmod(0o600)

        self.stdout.write(self.style.SUCCESS("Chronicle development server"))
        for key, value in info.items():
            self.stdout.write(f"  {key:<12} {value}")
        shown = dev_json.relative_to(base_dir) if dev_json.is_relative_to(base_dir) else dev_json
        self.stdout.write(f"  (saved to {shown})")
        self.stdout.flush()
        # The children open their own connections; this process's would only hold
        # sessions (and keep the embedded server "in use") while it supervises.
        close_database_connections()

        env = self._child_env()
        specs = self._child_processes(base_dir, port, no_demo_worker, info)
        return self._supervise(specs, env, base_dir)

    # -- helpers ---------------------------------------------------------------

    def _read_existing(self, dev_json: Path) -> dict[str, Any] | None:
        if not dev_json.exists():
            return None
        try:
            data = json.loads(dev_json.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self.stderr.write(f"ignoring unreadable {dev_json.name}: {exc}")
            return None
        return data if isinstance(data, dict) else None

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if not env.get("DATABASE_URL"):
            # Children must reuse the embedded server this process already started.
            env["DATABASE_URL"] = database_url_from_settings(settings.DATABASES["default"])
        env.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def _child_processes(
        self, base_dir: Path, port: int, no_demo_worker: bool, info: dict[str, str]
    ) -> list[ProcessSpec]:
        extra: list[ProcessSpec] = []
        if no_demo_worker:
            self.stdout.write("demo worker disabled (--no-demo-worker)")
        elif (base_dir / "chronicle" / "demo_worker.py").exists():
            # Told where to connect, so it need not find this run's dev.json.
            connect = {
                "CHRONICLE_URL": info["url"],
                "CHRONICLE_NAMESPACE": info["namespace"],
                "CHRONICLE_API_KEY": info["api_key"],
            }
            extra.append(ProcessSpec("demo_worker", [sys.executable, "-m", "chronicle.demo_worker"], connect))
        else:
            self.stdout.write("note: chronicle/demo_worker.py not found; not starting a demo worker")
        return stack_processes(port, extra=extra, app=DEV_APP)

    def _supervise(self, specs: list[ProcessSpec], env: dict[str, str], cwd: Path) -> int:
        group = ProcessGroup(specs, env=env, cwd=cwd, grace_seconds=STOP_TIMEOUT_SECONDS)
        try:
            group.start()
            for name, proc in group.processes.items():
                self.stdout.write(f"started {name} (pid {proc.pid})")
            self.stdout.write("press Ctrl-C to stop")
            self.stdout.flush()
            while (gone := group.exited()) is None:
                time.sleep(0.5)
            name, rc = gone
            self.stderr.write(
                f"error: {name} exited unexpectedly with code {rc}; stopping the other processes"
            )
            return rc if rc > 0 else 1
        except (_Stop, KeyboardInterrupt):
            self.stdout.write("stopping Chronicle...")
            return 0
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            group.stop()
            self.stdout.write("stopped")
            self.stdout.flush()

    def _stop_embedded_database(self, *, quiet_if_kept: bool = False) -> None:
        """Stop the embedded PostgreSQL unless another process still uses it (and say so).

        ``quiet_if_kept``: a start refused for a busy port says nothing about a server
        the running ``make run`` keeps using.
        """
        data_dir = settings.CHRONICLE_EMBEDDED_PGDATA
        if data_dir is None:
            return
        conninfo = listen_conninfo()
        close_database_connections()
        outcome = stop_if_unused(Path(data_dir), conninfo)
        if not (quiet_if_kept and outcome.startswith(KEPT)):
            self.stdout.write(outcome)
            self.stdout.flush()
