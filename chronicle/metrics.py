"""Prometheus metrics: every family Chronicle exports is defined here, and served at /metrics.

Two kinds of families, by what they cost:

* **Observed as things happen** (counters and histograms, a few microseconds each): request
  count and latency by route, method and status, and the task polls' wait by kind and
  outcome (:func:`observe_request`, called once per request by ``chronicle.asgi``); timer
  lateness, shard lease renewals and ownership changes (the shard owner); rate-limit
  refusals (``namespaces.rate_limits``). Other modules call these with one line each.
* **Computed at scrape time** by a few bounded queries (:class:`DatabaseCollector`), so
  the hot path pays nothing for them: task-queue backlog and oldest-task age, due timers
  and the oldest one's lateness, shard ownership per owner, shard owners' heartbeat age,
  workflow-task dispatch latency and turnaround, and history length and size of the runs
  active in the last minute (read from the events those runs appended).

Under gunicorn every worker is a process of its own, so prometheus-client runs in its
multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR`` names a folder where each process keeps its
values in a memory-mapped file, and ``/metrics`` (any worker) adds them all up.
``platform/gunicorn.conf.py`` makes such a folder when none is given; give the daemons
(shard owner, batch runner) the same folder, on the same host or a shared volume, and the
frontend's ``/metrics`` shows theirs too. Files are named by host and pid, so processes in
separate containers sharing one volume never write to the same file.

``CHRONICLE_METRICS_TOKEN``, when set, is required as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import functools
import hmac
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

METRICS_PATH = "/metrics"
_HOST = socket.gethostname().replace("_", "-")
_identity = {"pid": -1, "name": ""}


def process_identity(pid: int | None = None) -> str:
    """This process's name in the multiprocess folder: host and pid (one folder may be
    shared by containers, whose pids repeat). Called on every value update: cached."""
    if pid is not None:
        return f"{_HOST}-{pid}"
    current = os.getpid()
    if _identity["pid"] != current:
        _identity["pid"], _identity["name"] = current, f"{_HOST}-{current}"
    return str(_identity["name"])


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


if multiprocess_dir():
    os.makedirs(str(multiprocess_dir()), exist_ok=True)
    values.ValueClass = values.MultiProcessValue(process_identifier=process_identity)  # type: ignore[no-untyped-call]

# -- observed as things happen -----------------------------------------------------------
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
REQUEST_SECONDS = Histogram(
    "chronicle_request_duration_seconds",
    "HTTP requests by route, method and status: count and latency (long-polls included).",
    ["route", "method", "status"],
    buckets=_LATENCY_BUCKETS,
)
POLL_WAIT_SECONDS = Histogram(
    "chronicle_poll_wait_seconds",
    "Long-polls from arrival to answer, by kind (workflow, activity, history) and outcome "
    "(task: work handed out, empty: timed out with nothing).",
    ["kind", "outcome"],
    buckets=_LATENCY_BUCKETS,
)
TIMER_LATENESS_SECONDS = Histogram(
    "chronicle_timer_lateness_seconds",
    "How long after its fire time the shard owner fired a shard's earliest due timer.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
SHARD_LEASE_RENEWALS = Counter(
    "chronicle_shard_lease_renewals", "Shard leases a shard owner renewed (one per shard per renewal)."
)
SHARD_OWNERSHIP_CHANGES = Counter(
    "chronicle_shard_ownership_changes",
    "Shards a shard owner acquired, released (rebalancing) or lost (taken over).",
    ["change"],
)
RATE_LIMIT_REFUSALS = Counter(
    "chronicle_rate_limit_refusals",
    "Calls refused or delayed by a rate limit, by bucket (rps: a namespace's requests, "
    "dispatch: task dispatch to pollers).",
    ["bucket"],
)

# -- hooks: one-line calls from the code that knows --------------------------------------
_POLL_KINDS = {"/workflow-tasks/poll": "workflow", "/activity-tasks/poll": "activity"}
_LITERAL_GROUPS = frozenset({"endpoint", "call"})  # lane path parts that name the call, not an id
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")
_children: dict[tuple[str, str, int], tuple[Any, str | None]] = {}


def observe_request(scope: dict[str, Any], route: str, status: int, seconds: float) -> None:
    """One request answered: its latency by route, method and status; a poll's wait too."""
    key = (route, scope["method"], status)
    known = _children.get(key)
    if known is None:
        poll_kind = next((kind for tail, kind in _POLL_KINDS.items() if route.endswith(tail)), None)
        if poll_kind is None and route.endswith("/history"):
            poll_kind = "history"
        known = (REQUEST_SECONDS.labels(route, key[1], str(status) if status else "disconnected"), poll_kind)
        _children[key] = known
    known[0].observe(seconds)
    if known[1] is not None:
        _observe_poll(scope, known[1], status, seconds)


def _observe_poll(scope: dict[str, Any], kind: str, status: int, seconds: float) -> None:
    if kind == "history" and b"wait_new_event=true" not in scope.get("query_string", b""):
        return  # a plain history read, not a wait
    outcome = "task" if status == 200 else "empty" if status == 204 else "error"
    POLL_WAIT_SECONDS.labels(kind, outcome).observe(seconds)


def lane_route(match: Any) -> str:
    """A lean-lane call's route: its path with every id part as ``{name}``."""
    path: str = match.string
    parts: list[str] = []
    end = 0
    for name, value in match.groupdict().items():
        if value is None or name in _LITERAL_GROUPS:
            continue
        start, stop = match.span(name)
        parts += [path[end:start], "{", name, "}"]
        end = stop
    parts.append(path[end:])
    return "".join(parts)


@functools.lru_cache(maxsize=4096)
def django_route(path: str) -> str:
    """A Django path's route (``/api/v1/namespaces/{namespace}/...``), cached by path."""
    from django.urls import Resolver404, get_resolver

    if path.startswith("/static/"):
        return "/static/"
    try:
        route = str(get_resolver().resolve(path).route)
    except Resolver404:
        return "unmatched"
    return "/" + _CONVERTER.sub(r"{\1}", route)  # <str:namespace> -> {namespace}, as the lane's


def timer_lateness(now: datetime, fire_times: Iterable[datetime | None]) -> None:
    """The shard owner is about to fire due timers whose shards' earliest were due at ``fire_times``."""
    for at in fire_times:
        if at is not None:
            TIMER_LATENESS_SECONDS.observe(max(0.0, (now - at).total_seconds()))


def lease_renewals(count: int) -> None:
    SHARD_LEASE_RENEWALS.inc(count)


def shard_ownership_change(change: str, count: int = 1) -> None:
    SHARD_OWNERSHIP_CHANGES.labels(change).inc(count)


def rate_limit_refused(bucket_key: str) -> None:
    RATE_LIMIT_REFUSALS.labels(bucket_key.split(":", 1)[0]).inc()


class Timed:
    """The ASGI ``send`` of one request, remembering the status it answered."""

    __slots__ = ("send", "started", "status")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.status = 0
        self.started = time.perf_counter()

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self.send(message)

    def done(self, scope: dict[str, Any], route: str | None) -> None:
        observe_request(
            scope, route or django_route(scope["path"]), self.status, time.perf_counter() - self.started
        )


# -- /metrics -----------------------------------------------------------------------------
async def serve(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Answer a scrape: every process's values plus the database's, in the text format."""
    from django.conf import settings

    from chronicle.db import off_loop

    status, body, kind = 200, b"", CONTENT_TYPE_LATEST
    token = settings.CHRONICLE_METRICS_TOKEN
    if scope["method"] not in ("GET", "HEAD"):
        status, body, kind = 405, b"method not allowed\n", "text/plain"
    elif token and not hmac.compare_digest(_bearer(scope), f"Bearer {token}".encode()):
        status, body, kind = 401, b"a bearer token is required\n", "text/plain"
    else:
        body = await off_loop(render)()
    headers = [(b"content-type", kind.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


def render() -> bytes:
    """The exposition: the processes' families (all processes' in multiprocess mode), then
    the ones computed from the database."""
    folder = multiprocess_dir()
    if folder:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    else:
        registry = REGISTRY
    return generate_latest(registry) + generate_latest(_DATABASE_REGISTRY)


def _bearer(scope: dict[str, Any]) -> bytes:
    return next((bytes(v) for k, v in scope.get("headers", ()) if k == b"authorization"), b"")


class DatabaseCollector(Collector):
    """The families computed at scrape time (:mod:`chronicle.metrics_queries` holds the SQL)."""

    def collect(self) -> Iterator[Metric]:
        from chronicle.metrics_queries import database_families

        yield from database_families()


_DATABASE_REGISTRY = CollectorRegistry(auto_describe=False)
_DATABASE_REGISTRY.register(DatabaseCollector())
