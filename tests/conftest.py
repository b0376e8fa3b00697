"""Shared fixtures: the real stack (frontend + shard owner) on the test database.

The processes run against pytest-django's test database on free 127.0.0.1 ports;
data the tests create for them is committed (``django_db_blocker.unblock``).

The suite runs against ``DATABASE_URL`` or, without it, the embedded PostgreSQL under
``.chronicle/`` (a unix socket). Every connection a test opens besides Django's comes
from :func:`database_url` (a child process's ``DATABASE_URL``) or
:func:`database_conninfo` / the ``other_connection`` fixture (a psycopg connection),
which know both. Without Chromium the browser tier is skipped, and the run says so.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.conf import settings

from chronicle.db import listen_conninfo
from chronicle.embedded_postgres import settings_database_url, stop_if_unused
from chronicle.launcher import ProcessGroup, batch_runner_process, frontend_process, shard_owner_process
from namespaces.models import Namespace
from namespaces.services import api_key_issue

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until truthy; fail the test with a clear message at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def database_url() -> str:
    """The test database as a ``DATABASE_URL`` for the processes a test starts.

    The embedded server's socket directory is in django-environ's form, which libpq does
    not read: a psycopg connection takes :func:`database_conninfo`.
    """
    return settings_database_url(settings.DATABASES["default"])


def database_conninfo() -> str:
    """A libpq conninfo string for the test database, for a psycopg connection of a test's own."""
    return listen_conninfo()


@pytest.fixture
def other_connection(django_db_setup: Any) -> Iterator[psycopg.Connection[Any]]:
    """A second session on the test database beside Django's (to hold a lock, to watch)."""
    with psycopg.connect(database_conninfo(), application_name="chronicle-test-other") as conn:
        yield conn


CHROMIUM = os.environ.get("CHRONICLE_CHROMIUM", "/usr/bin/chromium")
BROWSER_DIR = ROOT / "tests" / "browser"


def browser_skip_reason() -> str | None:
    """Why the browser tier cannot run here (None when it can).

    ``CHRONICLE_REQUIRE_BROWSER=1`` (CI) never skips: a missing Chromium then fails the
    browser tests instead of passing quietly.
    """
    if os.path.exists(CHROMIUM) or os.environ.get("CHRONICLE_REQUIRE_BROWSER") == "1":
        return None
    return (
        f"browser tier skipped: no Chromium at {CHROMIUM} (install the chromium package, "
        "e.g. `apt-get install chromium`, or set CHRONICLE_CHROMIUM to its path)"
    )


def skip_browser_tier(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the browser tests, with the reason, when there is no Chromium to drive."""
    reason = browser_skip_reason()
    if reason is None:
        return
    skipped = 0
    for item in items:
        if BROWSER_DIR in Path(item.path).parents or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.skip(reason=reason))
            skipped += 1
    config.stash[BROWSER_SKIPPED] = skipped


BROWSER_SKIPPED = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Name the skipped browser tier at the end, where it cannot be missed."""
    skipped = config.stash.get(BROWSER_SKIPPED, 0)
    if skipped:
        terminalreporter.write_line(f"{browser_skip_reason()} ({skipped} tests)", yellow=True, bold=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the embedded PostgreSQL when the run used it and no one else does, so a test
    run leaves nothing running (a ``make run`` beside it keeps it)."""
    if not settings.configured or settings.CHRONICLE_EMBEDDED_PGDATA is None:
        return
    data_dir = settings.CHRONICLE_EMBEDDED_PGDATA
    from django.db import connections

    conninfo = listen_conninfo()  # the test database is dropped: its NAME is the server's own again
    for conn in connections.all(initialized_only=True):
        conn.close()
        conn.close_pool()
    terminal = session.config.pluginmanager.get_plugin("terminalreporter")
    message = stop_if_unused(Path(data_dir), conninfo)
    if terminal is not None:
        terminal.write_line(message)


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment: Any, django_db_blocker: Any) -> Iterator[None]:
    """Always create the test database: the e2e tier uses it without db markers."""
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        config = setup_databases(verbosity=0, interactive=False, aliases={"default"})
    yield
    with django_db_blocker.unblock():
        end_leftover_sessions()
        teardown_databases(config, verbosity=0)


def end_leftover_sessions() -> None:
    """Name and end the sessions still on the test database when the run is over, so it
    can be dropped: a stopped stack's backend still exiting, or a connection a worker
    thread of this process never closed. Every stack is stopped by now."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, application_name, state FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        leftovers = cursor.fetchall()
        if leftovers:
            print(f"\nending sessions left on the test database: {leftovers}", file=sys.stderr)
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid",
                [[row[0] for row in leftovers]],
            )


STACK_OWNER = "test-owner-1"


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    group: ProcessGroup
    owner: str = STACK_OWNER  # the name of the shard owner the stack keeps running

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        """The children in start order: frontend, the first shard owner, extras."""
        return list(self.group.processes.values())

    @property
    def shard_owner(self) -> subprocess.Popen[bytes]:
        """The stack's shard owner: the first, or the one that replaced it."""
        return self.group.processes[f"shard_owner:{self.owner}"]

    def replace_shard_owner(self, name: str) -> subprocess.Popen[bytes]:
        """Start ``name`` as the stack's shard owner (the old one stopped by the caller)."""
        started = self.start_shard_owner(name)
        self.owner = name
        return started

    def start_shard_owner(self, name: str) -> subprocess.Popen[bytes]:
        return self.group.add(shard_owner_process(name))

    def start_batch_runner(self, name: str) -> subprocess.Popen[bytes]:
        return self.group.add(batch_runner_process(name, lease_seconds=3))


def start_frontend(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """A frontend of its own, started as the stack starts one (for tests that kill and restart it)."""
    spec = frontend_process(port)
    return subprocess.Popen(spec.argv, cwd=ROOT, env={**env, **spec.env})


def frontend_up(url: str) -> bool:
    try:
        return httpx.get(url + "/api/schema/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="session")
def stack(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CHRONICLE_SHARD_LEASE_SECONDS": "3",
        "CHRONICLE_LOG_LEVEL": "WARNING",
        "CHRONICLE_ACCESS_LOG": "",
        "CHRONICLE_QUERY_TIMEOUT_SECONDS": "3",
    }
    group = ProcessGroup(
        [
            frontend_process(port),
            shard_owner_process(STACK_OWNER),
            batch_runner_process("test-batch-runner-1", lease_seconds=3),
        ],
        env=env,
        log_dir=tmp_path_factory.mktemp("stack-logs"),
    )
    with group:
        url = f"http://127.0.0.1:{port}"
        group.wait_http(url, timeout=30)
        yield Stack(url=url, env=env, group=group)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that need the live stack run after every other test; without Chromium the
    browser tests are skipped (:func:`skip_browser_tier`).

    Once started, the stack's shard owner takes shards and fires due timers in the shared
    test database, so a committed test that drives timers or shard fences by hand must run
    before it exists. pytest-django has already put the database tests in its order; the
    sort is stable, so that order holds within each part.
    """
    # A transactional test empties every table when it ends, the shard rows the stack's
    # shard owner holds included: after one, that owner fires no timer again. So the
    # stack tests that flush run last of all.
    items.sort(key=lambda item: ("stack" in getattr(item, "fixturenames", ()), _flushes(item)))
    skip_browser_tier(config, items)


def _flushes(item: pytest.Item) -> bool:
    """Whether the test empties the tables when it ends (a transactional database test)."""
    marker = item.get_closest_marker("django_db")
    transactional = marker is not None and bool(marker.kwargs.get("transaction"))
    return transactional or "transactional_db" in getattr(item, "fixturenames", ())


@dataclass
class Tenant:
    namespace: str
    keys: dict[str, str]  # role set name -> raw key


@pytest.fixture(scope="session")
def make_tenant(django_db_setup: Any, django_db_blocker: Any) -> Callable[..., Tenant]:
    def make(**limits: Any) -> Tenant:
        with django_db_blocker.unblock():
            ns = Namespace.objects.create(name=f"ns-{uuid.uuid4().hex[:8]}", **limits)
            keys = {}
            for label, roles in {
                "all": ["client", "worker", "admin"],
                "client": ["client"],
                "worker": ["worker"],
            }.items():
                _, raw = api_key_issue(namespace=ns, name=label, roles=roles)
                keys[label] = raw
        return Tenant(ns.name, keys)

    return make


class Api:
    """A thin HTTP client over the REST API, as a worker or client would use it."""

    def __init__(self, stack: Stack, tenant: Tenant, key: str = "all") -> None:
        self.base = f"{stack.url}/api/v1/namespaces/{tenant.namespace}"
        self.http = httpx.Client(headers={"Authorization": f"Bearer {tenant.keys[key]}"}, timeout=90)

    def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.http.post(self.base + path, json=body or {})

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(self.base + path, params=params)

    def start(self, workflow_id: str, task_queue: str, **fields: Any) -> dict[str, Any]:
        r = self.post(
            "/workflows",
            {"workflow_id": workflow_id, "workflow_type": "Test", "task_queue": task_queue, **fields},
        )
        assert r.status_code in (200, 201), r.text
        return dict(r.json())

    def events(self, workflow_id: str) -> list[dict[str, Any]]:
        r = self.get(f"/workflows/{workflow_id}/history", page_size=256)
        assert r.status_code == 200, r.text
        return list(r.json()["events"])

    def event_types(self, workflow_id: str) -> list[str]:
        return [e["event_type"] for e in self.events(workflow_id)]

    def describe(self, workflow_id: str) -> dict[str, Any]:
        r = self.get(f"/workflows/{workflow_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())


class ScriptedWorker:
    """A worker over raw HTTP whose decisions the test scripts."""

    def __init__(self, api: Api, task_queue: str, identity: str = "scripted") -> None:
        self.api = api
        self.queue = task_queue
        self.identity = identity

    def poll_workflow_task(self, timeout: float = 10) -> dict[str, Any]:
        r = self.api.post(
            f"/task-queues/{self.queue}/workflow-tasks/poll", {"identity": self.identity, "timeout": timeout}
        )
        assert r.status_code == 200, f"no workflow task: {r.status_code} {r.text}"
        return dict(r.json())

    def poll_activity_task(self, timeout: float = 10) -> dict[str, Any]:
        r = self.api.post(
            f"/task-queues/{self.queue}/activity-tasks/poll", {"identity": self.identity, "timeout": timeout}
        )
        assert r.status_code == 200, f"no activity task: {r.status_code} {r.text}"
        return dict(r.json())

    def complete_workflow_task(
        self, task: dict[str, Any], *commands: dict[str, Any], **extra: Any
    ) -> httpx.Response:
        return self.api.post(
            f"/task-queues/{self.queue}/workflow-tasks/complete",
            {
                "task_token": task["task_token"],
                "commands": list(commands),
                "identity": self.identity,
                **extra,
            },
        )

    def activity(self, action: str, task: dict[str, Any], **body: Any) -> httpx.Response:
        return self.api.post(
            f"/task-queues/{self.queue}/activity-tasks/{action}", {"task_token": task["task_token"], **body}
        )


def command(command_type: str, **attributes: Any) -> dict[str, Any]:
    return {"command_type": command_type, "attributes": attributes}


@pytest.fixture
def tenant(make_tenant: Callable[..., Tenant]) -> Tenant:
    return make_tenant()


@pytest.fixture
def api(stack: Stack, tenant: Tenant) -> Api:
    return Api(stack, tenant)


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def worker(api: Api, queue: str) -> ScriptedWorker:
    return ScriptedWorker(api, queue)
