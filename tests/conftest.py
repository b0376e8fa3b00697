"""Shared fixtures: the real stack (frontend + shard owner) on the test database.

The processes run against pytest-django's test database on free 127.0.0.1 ports;
data the tests create for them is committed (``django_db_blocker.unblock``).
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
import pytest
from django.conf import settings

from chronicle.embedded_postgres import socket_database_url
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
    db = settings.DATABASES["default"]
    host = db.get("HOST") or "127.0.0.1"
    if host.startswith("/"):
        return socket_database_url(host, user=db["USER"], database=db["NAME"], port=db.get("PORT") or None)
    return f"postgres://{db['USER']}@{host}:{db.get('PORT') or 5432}/{db['NAME']}"


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment: Any, django_db_blocker: Any) -> Iterator[None]:
    """Always create the test database: the e2e tier uses it without db markers."""
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        config = setup_databases(verbosity=0, interactive=False, aliases={"default"})
    yield
    with django_db_blocker.unblock():
        teardown_databases(config, verbosity=0)


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]]

    def start_shard_owner(self, name: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "run_shard_owner", "--owner", name],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.processes.append(proc)
        return proc

    def start_batch_runner(self, name: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "run_batch_jobs", "--owner", name, "--lease-seconds", "3"],
            cwd=ROOT,
            env=self.env,
        )
        self.processes.append(proc)
        return proc


def start_frontend(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """The API frontend as deployed: gunicorn with two uvicorn workers on 127.0.0.1:port."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "chronicle.asgi:application",
            "-k",
            "uvicorn_worker.UvicornWorker",
            "-w",
            "2",
            "-b",
            f"127.0.0.1:{port}",
            "--timeout",
            "120",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )


def frontend_up(url: str) -> bool:
    try:
        return httpx.get(url + "/api/schema/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="session")
def stack(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Stack]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CHRONICLE_SHARD_LEASE_SECONDS": "3",
        "CHRONICLE_LOG_LEVEL": "WARNING",
        "CHRONICLE_QUERY_TIMEOUT_SECONDS": "3",
    }
    frontend = start_frontend(env, port)
    s = Stack(url=f"http://127.0.0.1:{port}", env=env, processes=[frontend])
    s.start_shard_owner("test-owner-1")
    s.start_batch_runner("test-batch-runner-1")
    wait_until(lambda: frontend_up(s.url), timeout=30)
    yield s
    for proc in s.processes:
        proc.terminate()
    for proc in s.processes:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


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
