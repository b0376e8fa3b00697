"""The first day, as an operator lives it: from an empty database, ``createsuperuser`` (no
prompt, its password from the environment as Django reads it) and ``operator_key create``,
then nothing but the ``chronicle`` command line. The operator's key makes a namespace, its
first key and a member; the tenant's key then starts, signals, lists, shows, resets and
terminates a workflow that a worker process serves, and creates, describes, pauses and
deletes a schedule. Real frontend, shard owner and worker processes, a database of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from chronicle.launcher import ProcessGroup, frontend_process, shard_owner_process
from tests.conftest import ROOT, free_port, wait_until
from tests.e2e.test_cli_support import chronicle, cli_env, ok_json
from tests.e2e.test_provisioning import fresh_env as fresh_env  # the empty database, as a fixture
from tests.e2e.test_provisioning import manage

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

QUEUE = "first-day"


@contextmanager
def journal_worker(env: dict[str, str], journal: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The journal worker (tests/e2e/workers/journal_worker.py) as its own process; its third
    step's first attempt holds, so a run stays open until it is terminated."""
    worker_env = {**env, "TASK_QUEUE": QUEUE, "JOURNAL_PATH": str(journal), "JOURNAL_HOLD_STEP": "3"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.workers.journal_worker"], cwd=ROOT, env=worker_env
    )
    try:
        yield process
    finally:
        # a held activity never returns, so a clean shutdown would wait on it forever
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)


def events(env: dict[str, str], workflow_id: str, *run: str) -> list[str]:
    """The event types of the run's history, read with ``workflow show``."""
    shown = ok_json(chronicle(env, "workflow", "show", "-w", workflow_id, *run, "-o", "json"))
    return [event["event_type"] for event in shown]


def journalled(journal: Path) -> list[int]:
    return [int(line) for line in journal.read_text().split()] if journal.exists() else []


def provision(env: dict[str, str], url: str, operator_key: str) -> dict[str, str]:
    """The operator's part, with the CLI only: a namespace, its first key and an admin
    member. Answers the tenant's CLI environment."""
    ops = cli_env(None, None, CHRONICLE_URL=url, CHRONICLE_API_KEY=operator_key)
    assert ok_json(chronicle(ops, "namespace", "list", "-o", "json")) == []
    created = ok_json(chronicle(ops, "namespace", "create", "acme", "--retention-days", "7", "-o", "json"))
    assert created["name"] == "acme" and created["settings"]["retention_days"] == 7
    issued = ok_json(
        chronicle(
            ops, "-n", "acme", "key", "create", "--name", "app",
            "--role", "client", "--role", "worker", "--role", "admin", "-o", "json",
        )
    )  # fmt: skip
    joined = ok_json(
        chronicle(ops, "-n", "acme", "member", "grant", "ada", "--role", "admin", "--new-user", "-o", "json")
    )
    assert joined["username"] == "ada" and joined["one_time_password"]
    tenant = cli_env(
        None, None, CHRONICLE_URL=url, CHRONICLE_NAMESPACE="acme", CHRONICLE_API_KEY=issued["api_key"]
    )
    assert ok_json(chronicle(tenant, "member", "list", "-o", "json")) == [
        {"username": "ada", "role": "admin"}
    ]
    # the tenant's key is no operator's
    assert chronicle(tenant, "namespace", "list").returncode == 5
    return tenant


def drive_a_workflow(tenant: dict[str, str], journal: Path) -> None:
    """Start, signal, list, show, reset and terminate one workflow with the tenant's key."""
    wid = f"order-{uuid.uuid4().hex[:8]}"
    started = ok_json(
        chronicle(tenant, "workflow", "start", "--type", "Journal", "-t", QUEUE, "-w", wid, "-o", "json")
    )
    # two steps, then it waits for ``resume``
    wait_until(lambda: journalled(journal) == [1, 2], timeout=60)
    sent = chronicle(tenant, "workflow", "signal", "-w", wid, "--name", "resume")
    assert sent.returncode == 0, sent.stderr
    held = journal.with_name(journal.name + ".held")
    wait_until(lambda: journalled(held) == [3], timeout=60)  # step 3 runs and holds

    rows = ok_json(chronicle(tenant, "workflow", "list", "-q", f"WorkflowId = '{wid}'", "-o", "json"))
    assert [(r["workflow_id"], r["run_id"], r["status"]) for r in rows] == [
        (wid, started["run_id"], "Running")
    ]
    history = events(tenant, wid)
    assert history[0] == "WorkflowExecutionStarted" and "WorkflowExecutionSignaled" in history
    assert history.count("ActivityTaskCompleted") == 2

    reset = ok_json(
        chronicle(
            tenant, "workflow", "reset", "-w", wid, "--type", "FirstWorkflowTask",
            "--reason", "replay the order", "-o", "json",
        )
    )  # fmt: skip
    assert reset["run_id"] != started["run_id"]
    # the new run does the first two steps again, and the signal carried over lets it go on
    wait_until(lambda: journalled(journal) == [1, 2, 1, 2], timeout=60)
    wait_until(lambda: journalled(held) == [3, 3], timeout=60)
    assert "WorkflowExecutionSignaled" in events(tenant, wid, "-r", reset["run_id"])

    ended = chronicle(tenant, "workflow", "terminate", "-w", wid, "--reason", "first day over")
    assert ended.returncode == 0, ended.stderr
    described = ok_json(chronicle(tenant, "workflow", "describe", "-w", wid, "-o", "json"))
    assert described["status"] == "Terminated" and described["run_id"] == reset["run_id"]
    assert events(tenant, wid)[-1] == "WorkflowExecutionTerminated"
    runs = ok_json(chronicle(tenant, "workflow", "list", "-q", f"WorkflowId = '{wid}'", "-o", "json"))
    assert sorted(r["status"] for r in runs) == ["Terminated", "Terminated"]  # a reset ends the old run


def manage_a_schedule(tenant: dict[str, str]) -> None:
    """Create, describe, pause and delete a schedule with the tenant's key."""
    created = ok_json(
        chronicle(
            tenant, "schedule", "create", "-s", "nightly", "--cron", "0 3 * * *", "--type", "Journal",
            "-t", QUEUE, "-w", "nightly-journal", "-o", "json",
        )
    )  # fmt: skip
    assert created["schedule_id"] == "nightly" and created["info"]["next_action_times"]
    described = ok_json(chronicle(tenant, "schedule", "describe", "-s", "nightly", "-o", "json"))
    assert described["schedule"]["spec"]["cron_expressions"] == ["0 3 * * *"]
    assert described["schedule"]["state"]["paused"] is False
    paused = ok_json(
        chronicle(tenant, "schedule", "pause", "-s", "nightly", "--reason", "holiday", "-o", "json")
    )
    assert paused["schedule"]["state"]["paused"] is True
    deleted = chronicle(tenant, "schedule", "delete", "-s", "nightly")
    assert deleted.returncode == 0, deleted.stderr
    assert ok_json(chronicle(tenant, "schedule", "list", "-o", "json")) == []
    assert chronicle(tenant, "schedule", "describe", "-s", "nightly").returncode == 3


def test_from_an_empty_database_to_a_tenant_with_only_the_command_line(
    fresh_env: dict[str, str],  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    env: dict[str, Any] = {
        **fresh_env,
        "DJANGO_SUPERUSER_USERNAME": "root",
        "DJANGO_SUPERUSER_EMAIL": "root@example.com",
    }
    manage(env, "migrate", "--noinput")
    manage(env, "createsuperuser", "--noinput")
    operator_key = json.loads(manage(env, "operator_key", "create", "--username", "root", "--json"))[
        "operator_key"
    ]

    port = free_port()
    group = ProcessGroup(
        [frontend_process(port), shard_owner_process("first-day")], env=env, log_dir=tmp_path
    )
    with group:
        url = f"http://127.0.0.1:{port}"
        group.wait_http(url, timeout=60)
        tenant = provision(env, url, operator_key)
        journal = tmp_path / "journal"
        worker_env = {**env, **{k: v for k, v in tenant.items() if k.startswith("CHRONICLE_")}}
        with journal_worker(worker_env, journal) as worker:
            drive_a_workflow(tenant, journal)
            assert worker.poll() is None, "the worker process died"
        manage_a_schedule(tenant)
