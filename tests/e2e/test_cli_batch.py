"""``chronicle batch ...`` and ``chronicle search-attribute ...`` against the real stack (its
batch runner included): a job's progress until it ends, stopping one, and the namespace's
custom search attributes used by a start and a list."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import uuid

from tests.conftest import Stack, Tenant
from tests.e2e.test_cli_support import chronicle, cli_env, ok_json


def _start_runs(env: dict[str, str], kind: str, queue: str, count: int) -> list[str]:
    ids = [f"cli-batch-{uuid.uuid4().hex[:8]}" for _ in range(count)]
    for wid in ids:
        ok_json(chronicle(env, "workflow", "start", "--type", kind, "-t", queue, "-w", wid, "-o", "json"))
    return ids


def test_batch_terminate_with_progress_then_list_and_describe(
    stack: Stack, tenant: Tenant, queue: str
) -> None:
    env = cli_env(stack, tenant)
    kind = f"Batch{uuid.uuid4().hex[:6]}"
    _start_runs(env, kind, queue, 3)
    query = f"WorkflowType = '{kind}'"

    dry = ok_json(
        chronicle(
            env,
            "batch",
            "start",
            "--operation",
            "terminate",
            "-q",
            query,
            "--reason",
            "r",
            "--dry-run",
            "-o",
            "json",
        )
    )
    assert dry["count"] == 3

    job_id = f"job-{uuid.uuid4().hex[:8]}"
    waited = chronicle(
        env, "batch", "start", "--operation", "terminate", "-q", query, "--reason", "cleanup",
        "--job-id", job_id, "--wait", "-o", "jsonl",
    )  # fmt: skip
    assert waited.returncode == 0, waited.stderr
    progress = [json.loads(line) for line in waited.stdout.splitlines()]
    assert progress[-1]["state"] == "Completed" and progress[-1]["done"] == 3
    assert all(p["job_id"] == job_id for p in progress)
    counted = ok_json(chronicle(env, "workflow", "count", "-q", f"{query} AND ExecutionStatus = 'Terminated'",
                                "-o", "json"))  # fmt: skip
    assert counted["count"] == 3

    listed = chronicle(env, "batch", "list")
    assert listed.returncode == 0 and job_id in listed.stdout and "Completed" in listed.stdout
    described = ok_json(chronicle(env, "batch", "describe", "--job-id", job_id, "-o", "json"))
    assert described["operation"] == "terminate" and described["total"] == 3
    # following a finished job prints it and ends at once; on a pipe progress is a line on stderr
    followed = chronicle(env, "batch", "describe", "--job-id", job_id, "--follow")
    assert followed.returncode == 0 and f"job {job_id}: terminate 3/3 done" in followed.stderr

    missing = chronicle(env, "batch", "describe", "--job-id", "no-such-job")
    assert missing.returncode == 3


def test_on_a_terminal_progress_is_a_bar_on_stderr(stack: Stack, tenant: Tenant, queue: str) -> None:
    env = cli_env(stack, tenant)
    kind = f"Batch{uuid.uuid4().hex[:6]}"
    _start_runs(env, kind, queue, 5)
    terminal, side = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sdk.cli", "batch", "start", "--operation", "terminate", "-q",
             f"WorkflowType = '{kind}'", "--reason", "r", "--rps", "2", "--wait", "-o", "json"],
            env=env, cwd="/", stdout=subprocess.PIPE, stderr=side, text=True, timeout=90,
        )  # fmt: skip
    finally:
        os.close(side)
    shown = b""
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # the terminal's other side is closed: all of it was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(terminal)
    assert done.returncode == 0
    assert json.loads(done.stdout)["done"] == 5, "stdout holds only the result"
    text = shown.decode(errors="replace")
    assert "terminate Running" in text and "5/5" in text and "━" in text


def test_batch_signal_and_stop(stack: Stack, tenant: Tenant, queue: str) -> None:
    env = cli_env(stack, tenant)
    kind = f"Batch{uuid.uuid4().hex[:6]}"
    ids = _start_runs(env, kind, queue, 4)
    no_name = chronicle(env, "batch", "start", "--operation", "signal", "-q", "", "--reason", "r")
    assert no_name.returncode == 2 and "--signal-name" in no_name.stderr

    signalled = chronicle(
        env, "batch", "start", "--operation", "signal", "-q", f"WorkflowType = '{kind}'", "--reason", "nudge",
        "--signal-name", "nudge", "-i", '{"n": 1}', "--wait",
    )  # fmt: skip
    assert signalled.returncode == 0, signalled.stderr
    history = chronicle(env, "workflow", "show", "-w", ids[0], "-o", "jsonl")
    signals = [
        json.loads(line) for line in history.stdout.splitlines() if "WorkflowExecutionSignaled" in line
    ]
    assert [s["attributes"]["signal_name"] for s in signals] == ["nudge"]

    slow = ok_json(
        chronicle(
            env,
            "batch",
            "start",
            "--operation",
            "cancel",
            "-q",
            f"WorkflowType = '{kind}'",
            "--reason",
            "slowly",
            "--rps",
            "0.1",
            "-o",
            "json",
        )
    )
    stopped = ok_json(
        chronicle(env, "batch", "stop", "--job-id", slow["job_id"], "--reason", "enough", "-o", "json")
    )
    assert stopped["state"] == "Stopped" and stopped["done"] < 4
    followed = chronicle(env, "batch", "describe", "--job-id", slow["job_id"], "--follow")
    assert followed.returncode == 1 and "Stopped" in followed.stderr


def test_search_attributes_create_list_use_remove(stack: Stack, tenant: Tenant, queue: str) -> None:
    env = cli_env(stack, tenant)
    name = f"Customer{uuid.uuid4().hex[:6]}"
    made = chronicle(env, "search-attribute", "create", "--name", name, "--type", "Keyword")
    assert made.returncode == 0, made.stderr
    rows = ok_json(chronicle(env, "search-attribute", "list", "-o", "json"))
    assert rows["custom"] == {name: "Keyword"} and "WorkflowType" in rows["system"]
    table = chronicle(env, "search-attribute", "list")
    assert name in table.stdout and "custom" in table.stdout

    wid = f"cli-sa-{uuid.uuid4().hex[:8]}"
    ok_json(chronicle(env, "workflow", "start", "--type", "Sa", "-t", queue, "-w", wid,
                      "--search-attribute", f"{name}=acme", "-o", "json"))  # fmt: skip
    found = ok_json(chronicle(env, "workflow", "list", "-q", f"{name} = 'acme'", "-o", "json"))
    assert [r["workflow_id"] for r in found] == [wid]

    client_only = chronicle(cli_env(stack, tenant, key="client"), "search-attribute", "create", "--name", "X",
                            "--type", "Int")  # fmt: skip
    assert client_only.returncode == 5
    bad_type = chronicle(env, "search-attribute", "create", "--name", "X", "--type", "Money")
    assert bad_type.returncode == 2

    declined = chronicle(env, "search-attribute", "remove", "--name", name, stdin="n\n")
    assert declined.returncode == 1 and "Aborted" in declined.stderr
    assert name in ok_json(chronicle(env, "search-attribute", "list", "-o", "json"))["custom"]
    assert chronicle(env, "search-attribute", "remove", "--name", name, "--yes").returncode == 0
    assert ok_json(chronicle(env, "search-attribute", "list", "-o", "json"))["custom"] == {}
