"""Connections PostgreSQL dropped (a restart, a failover, an idle-session kill) cost no
request: the pool checks a connection before handing it out and replaces a dead one."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from chronicle.launcher import ProcessGroup, batch_runner_process, frontend_process, shard_owner_process
from tests.conftest import Api, ScriptedWorker, Stack, Tenant, command, free_port, wait_until

DROPPED_APPLICATION = "chronicle-dropped"


@pytest.fixture
def own_stack(stack: Stack, tmp_path: Path) -> Iterator[Stack]:
    """A frontend, shard owner and batch runner of this test's own, freshly started, whose
    connections carry an application name of their own: the drop below kills those only,
    so the session stack the later tests use keeps its connections.
    """
    port = free_port()
    group = ProcessGroup(
        [frontend_process(port), shard_owner_process("drop-owner"), batch_runner_process("drop-runner")],
        env={**stack.env, "CHRONICLE_DB_APPLICATION_NAME": DROPPED_APPLICATION},
        log_dir=tmp_path,
    )
    with group:
        url = f"http://127.0.0.1:{port}"
        group.wait_http(url, timeout=30)
        yield Stack(url=url, env=stack.env, group=group)


def terminate_chronicle_backends(django_db_blocker: Any) -> int:
    """Kill every connection of this test's stack to the test database, as a restart would,
    and return once those server processes are gone (``pg_terminate_backend`` only signals
    them: a request sent at once could still find a connection that has not yet been told,
    which a restart, whose sockets are closed by the time anyone reconnects, never shows)."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT array_agg(pid) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s"
            " AND pid <> pg_backend_pid()",
            [DROPPED_APPLICATION],
        )
        killed: list[int] = cursor.fetchone()[0] or []

        def gone() -> bool:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [killed])
            return int(cursor.fetchone()[0]) == 0

        wait_until(gone, timeout=10)
    return len(killed)


def test_requests_after_every_connection_was_dropped_succeed(
    own_stack: Stack, make_tenant: Callable[..., Tenant], django_db_blocker: Any
) -> None:
    stack = own_stack
    api = Api(stack, make_tenant())
    queue = f"q-{uuid.uuid4().hex[:8]}"
    for n in range(8):  # warm the frontend's pool with several connections
        api.start(f"warm-{n}", queue)
    assert terminate_chronicle_backends(django_db_blocker) > 0

    statuses = [api.get(f"/workflows/warm-{n}").status_code for n in range(8)]
    assert statuses == [200] * 8
    started = api.start("after-drop", queue)
    task = ScriptedWorker(api, queue).poll_workflow_task()
    assert task["workflow_execution"]["workflow_id"] in {f"warm-{n}" for n in range(8)} | {"after-drop"}
    assert started["run_id"]
    # The shard owner and batch runner lost their connections too, and carry on.
    assert all(process.poll() is None for process in stack.processes)


def test_the_shard_owner_keeps_firing_timers_after_its_connection_dropped(
    own_stack: Stack, make_tenant: Callable[..., Tenant], django_db_blocker: Any
) -> None:
    stack = own_stack
    api = Api(stack, make_tenant())
    for n in range(2):  # the second outage finds the reconnected owner
        workflow_id, queue = f"timer-{n}", f"q-{uuid.uuid4().hex[:8]}"
        worker = ScriptedWorker(api, queue)
        api.start(workflow_id, queue)
        task = worker.poll_workflow_task()
        terminate_chronicle_backends(django_db_blocker)
        done = worker.complete_workflow_task(
            task, command("StartTimer", timer_id="t", start_to_fire_timeout=0.5)
        )
        assert done.status_code == 200, done.text
        wait_until(lambda wid=workflow_id: "TimerFired" in api.event_types(wid), timeout=20)
