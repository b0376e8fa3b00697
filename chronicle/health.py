"""Probes: is the process up, can it serve, is a daemon's loop still turning.

* ``/healthz`` (liveness) answers 200 as long as the frontend process runs its event loop:
  no database, no Django, nothing that a slow dependency could hold up. A load balancer
  or an orchestrator restarts a frontend that stops answering it.
* ``/readyz`` (readiness) answers 200 when PostgreSQL answers and every migration this
  code knows is applied; 503 with the reason otherwise (during an outage, or a new
  frontend started before ``migrate`` ran). A load balancer stops sending work to a
  frontend that is not ready, and sends it again once it is.

Both answer in front of Django (``chronicle.asgi`` routes them first): unauthenticated, no
middleware, no access-log line (:class:`QuietProbes`), no Prometheus request sample.
The readiness check opens its own short connection with a 2 s limit, so an unreachable
server answers 503 in seconds instead of waiting on the connection pool's 30 s.

The daemons (shard owner, batch runner) serve no HTTP; each touches a heartbeat file,
``<CHRONICLE_HEARTBEAT_DIR>/<name>.alive``, from its loop (:func:`beat`), at most once a
second. ``python -m chronicle.health alive shard-owner`` exits 0 while that file is
fresh (the container image's and compose's health checks run it); ``python -m
chronicle.health url http://127.0.0.1:7243/readyz`` checks a frontend the same way
without curl. The shard owner also keeps its heartbeat row (``ShardOwnerProcess``),
which ``/metrics`` reports as an age per owner.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PROBE_PATHS = frozenset({"/healthz", "/readyz"})
READY_TIMEOUT_SECONDS = 2
DEFAULT_MAX_AGE_SECONDS = 60.0
_BEAT_EVERY_SECONDS = 1.0


class QuietProbes(logging.Filter):
    """Drops uvicorn's access-log lines of probes and scrapes: a load balancer's health
    check every few seconds would otherwise be most of the log."""

    PATHS = ("/healthz", "/readyz", "/metrics")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn logs: '%s - "%s %s HTTP/%s" %d' % (client, method, path?query, version, status)
        if isinstance(args, tuple) and len(args) >= 3:
            return str(args[2]).split("?", 1)[0] not in self.PATHS
        return True


async def serve(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Answer ``/healthz`` or ``/readyz`` (GET or HEAD)."""
    if scope["method"] not in ("GET", "HEAD"):
        await _answer(scope, send, 405, {"status": "method not allowed"})
        return
    if scope["path"] == "/healthz":
        await _answer(scope, send, 200, {"status": "ok"})
        return
    report = await asyncio.to_thread(readiness)
    await _answer(scope, send, 200 if report["status"] == "ok" else 503, report)


def readiness() -> dict[str, str]:
    """``{"status": "ok"|"unavailable", "database": ..., "migrations": ...}``."""
    from chronicle.db import BUSY_SERVER_MESSAGES, listen_conninfo

    try:
        with psycopg.connect(
            listen_conninfo(),
            connect_timeout=READY_TIMEOUT_SECONDS,
            options=f"-c statement_timeout={READY_TIMEOUT_SECONDS * 1000}",
            application_name="chronicle-readyz",
        ) as conn:
            missing = _missing_migrations(conn)
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if _MIGRATIONS.all_applied and any(busy in reason for busy in BUSY_SERVER_MESSAGES):
            # The server answers but has no slot for one more session: this frontend's pool
            # still serves, and taking every frontend out at once would make it an outage.
            return {"status": "ok", "database": f"busy: {reason}", "migrations": "ok"}
        return {"status": "unavailable", "database": f"unreachable: {reason}", "migrations": "unknown"}
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        return {
            "status": "unavailable",
            "database": "ok",
            "migrations": f"{len(missing)} not applied: {shown}",
        }
    return {"status": "ok", "database": "ok", "migrations": "ok"}


class _Migrations:
    """The migrations this code expects, read from disk once; and whether they were all
    found applied once (they stay applied, so later probes only check the connection)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.expected: set[tuple[str, str]] | None = None
        self.all_applied = False

    def leaves(self) -> set[tuple[str, str]]:
        with self.lock:
            if self.expected is None:
                from django.db.migrations.loader import MigrationLoader

                self.expected = set(MigrationLoader(None, ignore_no_migrations=True).graph.leaf_nodes())
            return self.expected


_MIGRATIONS = _Migrations()


def _missing_migrations(conn: psycopg.Connection[Any]) -> list[str]:
    """The latest migration of each app not recorded as applied (a query either way, so a
    probe always proves the connection answers)."""
    if _MIGRATIONS.all_applied:
        conn.execute("SELECT 1")
        return []
    exists = conn.execute("SELECT to_regclass('django_migrations') IS NOT NULL").fetchone()
    applied: set[tuple[str, str]] = set()
    if exists and exists[0]:
        applied = {(app, name) for app, name in conn.execute("SELECT app, name FROM django_migrations")}
    missing = sorted(f"{app}.{name}" for app, name in _MIGRATIONS.leaves() - applied)
    _MIGRATIONS.all_applied = not missing
    return missing


async def _answer(scope: dict[str, Any], send: Send, status: int, body: dict[str, str]) -> None:
    raw = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(raw)).encode()),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else raw})


# -- daemons' heartbeat files ------------------------------------------------------------
_last_beat: dict[str, float] = {}


def beat(name: str) -> None:
    """Touch ``<CHRONICLE_HEARTBEAT_DIR>/<name>.alive`` (at most once a second; nothing
    when the setting is empty). Daemons call this from their loops."""
    folder = settings.CHRONICLE_HEARTBEAT_DIR
    now = time.monotonic()
    if not folder or now - _last_beat.get(name, -_BEAT_EVERY_SECONDS) < _BEAT_EVERY_SECONDS:
        return
    _last_beat[name] = now
    path = Path(folder) / f"{name}.alive"
    try:
        path.touch()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def heartbeat_age(name: str, folder: str) -> float | None:
    """Seconds since ``name`` last beat, None if it never did."""
    try:
        return time.time() - (Path(folder) / f"{name}.alive").stat().st_mtime
    except FileNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    """``alive NAME``: 0 while the daemon's heartbeat file is fresh; ``url URL``: 0 on a 200."""
    parser = argparse.ArgumentParser(prog="python -m chronicle.health", description=main.__doc__)
    sub = parser.add_subparsers(dest="check", required=True)
    alive = sub.add_parser("alive", help="a daemon's heartbeat file is fresh")
    alive.add_argument("name", help="shard-owner or batch-runner")
    alive.add_argument("--max-age", type=float, default=DEFAULT_MAX_AGE_SECONDS)
    alive.add_argument("--dir", default=os.environ.get("CHRONICLE_HEARTBEAT_DIR", ""))
    url = sub.add_parser("url", help="a URL answers 200 (a frontend's /healthz or /readyz)")
    url.add_argument("url")
    args = parser.parse_args(argv)
    if args.check == "url":
        try:
            with urllib.request.urlopen(args.url, timeout=5) as reply:
                return 0 if reply.status == 200 else 1
        except (OSError, urllib.error.URLError) as error:
            print(f"{args.url}: {error}", file=sys.stderr)
            return 1
    if not args.dir:
        print("CHRONICLE_HEARTBEAT_DIR is not set (nor --dir)", file=sys.stderr)
        return 2
    age = heartbeat_age(args.name, args.dir)
    if age is None or age > args.max_age:
        print(f"{args.name}: no heartbeat in {args.max_age:.0f} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
