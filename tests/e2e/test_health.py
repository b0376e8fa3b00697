"""The probes against real processes: /healthz while the process runs, /readyz only while
PostgreSQL answers and the migrations are applied (failing during an outage and recovering
after it), and the daemons' heartbeat files."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from chronicle.launcher import ProcessGroup, batch_runner_process, frontend_process, shard_owner_process
from tests.conftest import ROOT, Stack, free_port, wait_until


def test_healthz_and_readyz_answer_on_the_stack_without_credentials(stack: Stack) -> None:
    alive = httpx.get(stack.url + "/healthz", timeout=5)
    assert (alive.status_code, alive.json()) == (200, {"status": "ok"})
    ready = httpx.get(stack.url + "/readyz", timeout=5)
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ok", "database": "ok", "migrations": "ok"}
    assert httpx.head(stack.url + "/readyz", timeout=5).status_code == 200
    assert httpx.post(stack.url + "/healthz", timeout=5).status_code == 405


class PostgresProxy:
    """A TCP relay in front of the test database that can be cut and restored, as an
    outage of the server would look to a frontend."""

    def __init__(self) -> None:
        db = settings.DATABASES["default"]
        host, port = db.get("HOST") or "/var/run/postgresql", int(db.get("PORT") or 5432)
        self.target: Any = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port)
        self.family = socket.AF_UNIX if host.startswith("/") else socket.AF_INET
        self.port = free_port()
        self.sockets: list[socket.socket] = []
        self.listener: socket.socket | None = None

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and break the open ones."""
        assert self.listener is not None
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        self.sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.socket(self.family)
            server.connect(self.target)
            self.sockets += [client, server]
            for one, other in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(one, other), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def proxied_frontend(stack: Stack, tmp_path: Path) -> Iterator[tuple[str, PostgresProxy]]:
    proxy = PostgresProxy()
    proxy.start()
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    url = f"postgres://{db['USER']}{password}@127.0.0.1:{proxy.port}/{db['NAME']}"
    port = free_port()
    group = ProcessGroup([frontend_process(port)], env={**stack.env, "DATABASE_URL": url}, log_dir=tmp_path)
    with group:
        base = f"http://127.0.0.1:{port}"
        group.wait_http(base, timeout=30)
        yield base, proxy
    proxy.cut()


def ready(base: str) -> int:
    return httpx.get(base + "/readyz", timeout=10).status_code


def test_readyz_fails_while_the_database_is_unreachable_and_recovers_after(
    proxied_frontend: tuple[str, PostgresProxy],
) -> None:
    base, proxy = proxied_frontend
    assert wait_until(lambda: ready(base) == 200, timeout=10)
    proxy.cut()
    started = time.monotonic()
    down = httpx.get(base + "/readyz", timeout=10)
    assert down.status_code == 503, down.text
    assert down.json()["database"].startswith("unreachable"), down.json()
    assert time.monotonic() - started < 5  # its own short connection, not the pool's 30 s wait
    assert httpx.get(base + "/healthz", timeout=5).status_code == 200  # the process itself is fine
    proxy.start()
    assert wait_until(lambda: ready(base) == 200, timeout=10)


def test_readyz_names_migrations_not_applied(stack: Stack, tmp_path: Path) -> None:
    """A frontend on a database nobody migrated is not ready (a new release before `migrate`)."""
    import psycopg

    from tests.conftest import database_conninfo

    name = f"unmigrated_{os.getpid()}"
    with psycopg.connect(database_conninfo(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        db = settings.DATABASES["default"]
        env = {**stack.env, "DATABASE_URL": stack.env["DATABASE_URL"].replace(f"/{db['NAME']}", f"/{name}")}
        port = free_port()
        with ProcessGroup([frontend_process(port)], env=env, log_dir=tmp_path) as group:
            base = f"http://127.0.0.1:{port}"
            group.wait_http(base, timeout=30)
            answer = httpx.get(base + "/readyz", timeout=10)
            assert answer.status_code == 503
            assert answer.json()["database"] == "ok"
            assert " not applied: " in answer.json()["migrations"]
    finally:
        with psycopg.connect(database_conninfo(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_daemons_touch_their_heartbeat_files_and_the_check_reads_them(stack: Stack, tmp_path: Path) -> None:
    beats = tmp_path / "beats"
    env = {**stack.env, "CHRONICLE_HEARTBEAT_DIR": str(beats)}
    specs = [shard_owner_process("beat-owner"), batch_runner_process("beat-runner", lease_seconds=3)]

    def check(name: str) -> int:
        argv = [
            sys.executable,
            "-m",
            "chronicle.health",
            "alive",
            name,
            "--max-age",
            "5",
            "--dir",
            str(beats),
        ]
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=30).returncode

    assert check("shard-owner") == 1  # no file yet
    with ProcessGroup(specs, env=env, log_dir=tmp_path / "logs"):
        wait_until(
            lambda: (beats / "shard-owner.alive").exists() and (beats / "batch-runner.alive").exists(), 30
        )
        first = (beats / "shard-owner.alive").stat().st_mtime
        wait_until(lambda: (beats / "shard-owner.alive").stat().st_mtime > first, timeout=10)
        assert check("shard-owner") == 0
        assert check("batch-runner") == 0
    os.utime(beats / "shard-owner.alive", (time.time() - 60, time.time() - 60))
    assert check("shard-owner") == 1  # stale: the daemon stopped beating


def test_probes_leave_no_access_log_line(stack: Stack, tmp_path: Path) -> None:
    port = free_port()
    env = {**stack.env, "CHRONICLE_ACCESS_LOG": "-", "CHRONICLE_LOG_LEVEL": "INFO"}
    with ProcessGroup([frontend_process(port)], env=env, log_dir=tmp_path) as group:
        base = f"http://127.0.0.1:{port}"
        group.wait_http(base, timeout=30)
        for path in ("/healthz", "/readyz", "/healthz"):
            httpx.get(base + path, timeout=10)
        httpx.get(base + "/api/schema/?probe-check", timeout=10)
        log = tmp_path / "frontend.log"
        wait_until(lambda: "probe-check" in log.read_text(), timeout=10)
    text = log.read_text()
    assert "/healthz" not in text and "/readyz" not in text, text[-3000:]


def test_the_frontend_serves_the_ui_and_admin_static_files_itself(stack: Stack) -> None:
    """WhiteNoise, from the apps' folders until collectstatic has run (with DEBUG off)."""
    for path in ("/static/admin/css/base.css", "/static/chronicle/ui.css"):
        answer = httpx.get(stack.url + path, timeout=10)
        assert answer.status_code == 200, path
        assert "max-age" in answer.headers.get("cache-control", ""), path
