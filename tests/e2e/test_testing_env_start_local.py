"""``WorkflowEnvironment.start_local()`` as a Temporal test uses it: one call starts a private
Chronicle stack (this checkout's ``manage.py start_dev``, a subprocess), a worker runs a
workflow on ``env.client``, and leaving ``async with`` stops every process it started."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sdk import activity, workflow
from sdk.testing import WorkflowEnvironment
from sdk.testing._workflow import LocalServer
from sdk.worker import Worker
from tests.conftest import database_conninfo, database_url

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]


@pytest.fixture
def own_database(django_db_setup: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An empty database of the stack's own (its start migrates it), named in ``DATABASE_URL``."""
    name = f"{psycopg.conninfo.conninfo_to_dict(database_conninfo())['dbname']}_envlocal"
    with psycopg.connect(database_conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    monkeypatch.setenv("DATABASE_URL", database_url().rsplit("/", 1)[0] + "/" + name)
    yield name
    with psycopg.connect(database_conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@activity.defn
async def shout(text: str) -> str:
    return text.upper() + "!"


@workflow.defn
class Shouting:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_activity(shout, text, start_to_close_timeout=timedelta(seconds=10))


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_start_local_runs_a_workflow_and_stops_its_stack(own_database: str) -> None:
    async def scenario() -> tuple[LocalServer, int]:
        async with await WorkflowEnvironment.start_local() as env:
            server: LocalServer = env._server  # type: ignore[attr-defined]
            assert server.process is not None and server.process.poll() is None
            queue = f"q-{uuid.uuid4().hex[:8]}"
            async with Worker(env.client, task_queue=queue, workflows=[Shouting], activities=[shout]):
                result = await env.client.execute_workflow(
                    Shouting.run, "hello", id=f"wf-{uuid.uuid4().hex[:8]}", task_queue=queue
                )
            assert result == "HELLO!"
            process = server.process
        assert process.poll() is not None  # stopped, not left running
        return server, server.port

    server, port = asyncio.run(scenario())
    assert not _port_open(port)
    assert not Path(server.state_dir).exists()
