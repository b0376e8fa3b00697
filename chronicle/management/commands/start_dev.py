"""``manage.py start_dev``: one command that runs a whole development Chronicle.

It migrates the database, bootstraps the ``default`` namespace with an API key
and a UI user (reusing them on later runs via ``.chronicle/dev.json``), then
supervises the child processes: the ASGI frontend under gunicorn, one shard
owner daemon, the batch-job runner and, when present, the demo worker of the SDK.

The children are the stack of :mod:`chronicle.launcher`. Ctrl-C or SIGTERM stops
every child (SIGTERM, wait up to 10 s, then SIGKILL) and exits 0. If a child exits
on its own the others are stopped and the command exits non-zero.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from chronicle.db import require_reachable_database
from chronicle.launcher import ProcessGroup, ProcessSpec, stack_processes

DEFAULT_PORT = 7243
STOP_TIMEOUT_SECONDS = 10.0


class _Stop(Exception):
    """Raised from the signal handler to leave the supervision loop."""


def database_url_from_settings(db: dict[str, Any]) -> str:
    """Rebuild a django-environ compatible URL from a ``DATABASES`` entry."""
    from chronicle.embedded_postgres import socket_database_url

    name = str(db.get("NAME") or "postgres")
    user = str(db.get("USER") or "postgres")
    host = str(db.get("HOST") or "")
    port = db.get("PORT") or ""
    password = str(db.get("PASSWORD") or "")
    if host.startswith("/"):
        if password:
            raise CommandError("password-protected unix-socket databases need DATABASE_URL set")
        return socket_database_url(host, user=user, database=name, port=port or None)
    auth = quote(user, safe="")
    if password:
        auth += ":" + quote(password, safe="")
    netloc = f"{auth}@{host or '127.0.0.1'}"
    if port:
        netloc += f":{int(port)}"
    return f"postgresql://{netloc}/{quote(name, safe='')}"


class Command(BaseCommand):
    help = "Run a development Chronicle: migrate, bootstrap, start frontend, shard owner and batch runner."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})"
        )
        parser.add_argument(
            "--no-demo-worker",
            action="store_true",
            help="Do not start sdk/demo_worker.py even if it exists.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        port: int = options["port"]
        base_dir = Path(settings.BASE_DIR)
        state_dir = base_dir / ".chronicle"
        state_dir.mkdir(parents=True, exist_ok=True)
        dev_json = state_dir / "dev.json"

        require_reachable_database()
        call_command("migrate", interactive=False, verbosity=1)

        from namespaces.services import bootstrap_dev_namespace

        existing = self._read_existing(dev_json)
        boot = bootstrap_dev_namespace(existing=existing)
        url = f"http://127.0.0.1:{port}"
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
        self.stdout.write(f"  (saved to {dev_json.relative_to(base_dir)})")
        self.stdout.flush()

        env = self._child_env()
        specs = self._child_processes(base_dir, port, options["no_demo_worker"])
        code = self._supervise(specs, env, base_dir)
        if code != 0:
            sys.exit(code)

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

    def _child_processes(self, base_dir: Path, port: int, no_demo_worker: bool) -> list[ProcessSpec]:
        extra: list[ProcessSpec] = []
        if no_demo_worker:
            self.stdout.write("demo worker disabled (--no-demo-worker)")
        elif (base_dir / "sdk" / "demo_worker.py").exists():
            extra.append(ProcessSpec("demo_worker", [sys.executable, "-m", "sdk.demo_worker"]))
        else:
            self.stdout.write("note: sdk/demo_worker.py not found; not starting a demo worker")
        return stack_processes(port, extra=extra)

    def _supervise(self, specs: list[ProcessSpec], env: dict[str, str], cwd: Path) -> int:
        group = ProcessGroup(specs, env=env, cwd=cwd, grace_seconds=STOP_TIMEOUT_SECONDS)

        def on_signal(signum: int, frame: FrameType | None) -> None:
            raise _Stop(signal.Signals(signum).name)

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
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
            group.stop()
            return rc if rc > 0 else 1
        except (_Stop, KeyboardInterrupt):
            # Ignore further signals while shutting down.
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            self.stdout.write("stopping Chronicle...")
            group.stop()
            self.stdout.write("stopped")
            return 0
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
