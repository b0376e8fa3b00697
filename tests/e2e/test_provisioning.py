"""A first day with no shell: from an empty database, ``migrate`` and ``createsuperuser``,
then only ``manage.py`` commands and REST make a working tenant, whose key starts and
finishes a workflow with the SDK, against real frontend and shard-owner processes.

The test takes a database of its own on the test server, so its tables really start
empty whatever else the suite committed to the shared test database.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.conf import settings

from chronicle.embedded_postgres import settings_database_url
from chronicle.launcher import ProcessGroup, frontend_process, shard_owner_process
from sdk import workflow
from sdk.client import Client
from sdk.worker import Worker
from tests.conftest import ROOT, database_conninfo, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@workflow.defn
class Greeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello {name}"


@pytest.fixture
def fresh_env(django_db_setup: Any) -> Iterator[dict[str, str]]:
    """The environment of processes on a new, empty database (dropped afterwards)."""
    name = f"prov_e2e_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_conninfo(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = settings_database_url({**settings.DATABASES["default"], "NAME": name})
    yield {
        **os.environ,
        "DATABASE_URL": url,
        "CHRONICLE_LOG_LEVEL": "WARNING",
        "CHRONICLE_ACCESS_LOG": "",
        "DJANGO_SUPERUSER_PASSWORD": "first-day-password",
    }
    with psycopg.connect(database_conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def test_a_fresh_database_becomes_a_working_tenant_without_a_shell(
    fresh_env: dict[str, str], tmp_path: Path
) -> None:
    env = fresh_env
    manage(env, "migrate", "--noinput")
    manage(env, "createsuperuser", "--noinput", "--username", "root", "--email", "root@example.com")
    operator_key = json.loads(manage(env, "operator_key", "create", "--username", "root", "--json"))[
        "operator_key"
    ]

    port = free_port()
    group = ProcessGroup([frontend_process(port), shard_owner_process("prov-e2e")], env=env, log_dir=tmp_path)
    with group:
        url = f"http://127.0.0.1:{port}"
        group.wait_http(url, timeout=60)
        ops = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {operator_key}"}, timeout=30)
        assert ops.get("/api/v1/namespaces").json() == {"namespaces": []}

        created = ops.post("/api/v1/namespaces", json={"name": "acme", "retention_days": 7})
        assert created.status_code == 201, created.text
        issued = ops.post(
            "/api/v1/namespaces/acme/api-keys", json={"name": "app", "roles": ["client", "worker", "admin"]}
        )
        assert issued.status_code == 201, issued.text
        api_key = issued.json()["api_key"]

        # The tenant's own admin key takes over: a person with no account yet joins.
        tenant = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=30)
        joined = tenant.post(
            "/api/v1/namespaces/acme/members", json={"username": "ada", "role": "admin", "new_user": True}
        )
        assert joined.status_code == 201, joined.text
        assert tenant.get("/api/v1/namespaces/acme/members").json()["members"] == [
            {"username": "ada", "role": "admin"}
        ]
        assert tenant.get("/api/v1/namespaces").status_code == 403  # not an operator
        members = json.loads(manage(env, "member", "list", "-n", "acme", "--json"))["members"]
        assert members == [{"username": "ada", "role": "admin"}]

        async def run_workflow() -> str:
            client = await Client.connect(url, namespace="acme", api_key=api_key)
            async with Worker(client, task_queue="first-day", workflows=[Greeting]):
                result = await client.execute_workflow(
                    Greeting.run, "world", id=f"wf-{uuid.uuid4().hex[:8]}", task_queue="first-day"
                )
            await client.close()
            return str(result)

        assert asyncio.run(asyncio.wait_for(run_workflow(), 90)) == "hello world"

        described = ops.get("/api/v1/namespaces/acme").json()
        assert described["settings"]["retention_days"] == 7 and described["members"] == 1
