"""Worker processes that die: a SIGKILLed worker's workflow is finished by a new process.

The workflow's activity journals each step to a file, so the test sees what really ran,
not only what the history claims.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from sdk.client import Client
from tests.conftest import ROOT, Api, Stack, Tenant, wait_until


def _start_worker(
    stack: Stack, tenant: Tenant, queue: str, journal: Path, hold_step: int = 0
) -> subprocess.Popen[bytes]:
    env = {
        **stack.env,
        "CHRONICLE_URL": stack.url,
        "CHRONICLE_NAMESPACE": tenant.namespace,
        "CHRONICLE_API_KEY": tenant.keys["all"],
        "TASK_QUEUE": queue,
        "JOURNAL_PATH": str(journal),
        "JOURNAL_HOLD_STEP": str(hold_step),
    }
    return subprocess.Popen([sys.executable, "-m", "tests.e2e.workers.journal_worker"], cwd=ROOT, env=env)


def _completed_activities(api: Api, workflow_id: str) -> int:
    return api.event_types(workflow_id).count("ActivityTaskCompleted")


def _journalled(journal: Path) -> list[int]:
    return [int(line) for line in journal.read_text().split()] if journal.exists() else []


def _kill(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(10) == -signal.SIGKILL


def _finish_on_a_new_worker(stack: Stack, tenant: Tenant, queue: str, journal: Path, workflow_id: str) -> int:
    """Start a fresh worker process, await the workflow's result, then stop the worker cleanly."""
    worker = _start_worker(stack, tenant, queue, journal)
    try:
        total = asyncio.run(_result(stack, tenant, workflow_id))
    finally:
        worker.terminate()
    assert worker.wait(20) == 0
    return total


def test_a_killed_worker_process_is_replaced_and_no_completed_step_reruns(
    stack: Stack, tenant: Tenant, api: Api, queue: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.txt"
    wid = f"wf-{uuid.uuid4().hex[:8]}"
    first = _start_worker(stack, tenant, queue, journal)
    try:
        api.start(wid, queue, workflow_type="Journal")
        wait_until(lambda: _completed_activities(api, wid) == 2, timeout=30)
        wait_until(lambda: api.event_types(wid)[-1] == "WorkflowTaskCompleted", timeout=30)
    finally:
        _kill(first)
    assert _journalled(journal) == [1, 2]
    r = api.post(f"/workflows/{wid}/signal", {"signal_name": "resume"})
    assert r.status_code in (200, 202), r.text
    assert _finish_on_a_new_worker(stack, tenant, queue, journal, wid) == 1 + 2 + 3 + 4
    assert _journalled(journal) == [1, 2, 3, 4]
    assert _completed_activities(api, wid) == 4


def test_an_activity_in_flight_on_a_killed_worker_is_retried_elsewhere(
    stack: Stack, tenant: Tenant, api: Api, queue: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.txt"
    held = tmp_path / "journal.txt.held"
    wid = f"wf-{uuid.uuid4().hex[:8]}"
    first = _start_worker(stack, tenant, queue, journal, hold_step=3)
    try:
        api.start(wid, queue, workflow_type="Journal")
        r = api.post(f"/workflows/{wid}/signal", {"signal_name": "resume"})
        assert r.status_code in (200, 202), r.text
        wait_until(held.exists, timeout=30)
    finally:
        _kill(first)
    assert _journalled(journal) == [1, 2]
    assert _finish_on_a_new_worker(stack, tenant, queue, journal, wid) == 1 + 2 + 3 + 4
    assert _journalled(journal) == [1, 2, 3, 4]
    assert held.read_text().split() == ["3"]
    assert _completed_activities(api, wid) == 4


async def _result(stack: Stack, tenant: Tenant, workflow_id: str) -> int:
    client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
    total: int = await asyncio.wait_for(client.get_workflow_handle(workflow_id).result(), 60)
    await client.close()
    return total


def test_a_worker_process_takes_the_next_workflow_task_with_each_activity_result(
    stack: Stack, tenant: Tenant, api: Api, queue: str, tmp_path: Path
) -> None:
    """Each activity result hands the run's next workflow task back to the worker that ran
    it: the history shows the task started for that worker, never scheduled on a queue for
    a poll to find, and the workflow ends as it would without the hand-back."""
    journal = tmp_path / "journal.txt"
    wid = f"wf-{uuid.uuid4().hex[:8]}"
    worker = _start_worker(stack, tenant, queue, journal)
    try:
        api.start(wid, queue, workflow_type="Journal")
        r = api.post(f"/workflows/{wid}/signal", {"signal_name": "resume"})
        assert r.status_code in (200, 202), r.text
        assert asyncio.run(_result(stack, tenant, wid)) == 1 + 2 + 3 + 4
    finally:
        worker.terminate()
    assert worker.wait(20) == 0
    events = api.events(wid)
    after_results = [
        events[i + 2]
        for i, event in enumerate(events)
        if event["event_type"] == "ActivityTaskCompleted" and i + 2 < len(events)
    ]
    assert [e["event_type"] for e in after_results] == ["WorkflowTaskStarted"] * 4
    assert [e["attributes"]["request_id"] for e in after_results] == ["handed-back"] * 4
    assert "WorkflowTaskTimedOut" not in [e["event_type"] for e in events]
    assert _journalled(journal) == [1, 2, 3, 4]
