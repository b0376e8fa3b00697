"""Sticky queues: fast fallback to the normal queue when the sticky poller is gone."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from tests.conftest import Api, ScriptedWorker

STICKY_TIMEOUT = 30.0  # far longer than the test may wait: only the fast fallback can deliver


def _wid() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


def _make_sticky(api: Api, worker: ScriptedWorker, sticky_queue: str) -> tuple[str, dict[str, Any]]:
    wid = _wid()
    api.start(wid, worker.queue)
    first = worker.poll_workflow_task()
    r = worker.complete_workflow_task(
        first, sticky_task_queue=sticky_queue, sticky_schedule_to_start_timeout=STICKY_TIMEOUT
    )
    assert r.status_code == 200, r.text
    return wid, first


def test_task_for_sticky_queue_without_poller_goes_to_normal_queue_at_once(
    api: Api, worker: ScriptedWorker
) -> None:
    wid, _ = _make_sticky(api, worker, f"{worker.queue}-sticky-never-polled")
    api.post(f"/workflows/{wid}/signal", {"signal_name": "wake"})

    began = time.monotonic()
    task = worker.poll_workflow_task(timeout=10)

    assert time.monotonic() - began < 5, "fallback waited for the sticky timeout"
    types = [e["event_type"] for e in task["history"]["events"]]
    assert types[0] == "WorkflowExecutionStarted", "a normal-queue poller gets the full history"
    assert "WorkflowTaskTimedOut" not in types, "the fast fallback writes no event"
    assert task["attempt"] == 1
    assert api.describe(wid)["sticky_task_queue"] == "", "starting on the normal queue clears stickiness"


def test_waiting_normal_poller_is_woken_for_sticky_task_without_poller(
    api: Api, worker: ScriptedWorker
) -> None:
    wid, _ = _make_sticky(api, worker, f"{worker.queue}-sticky-gone")
    result: dict[str, Any] = {}

    def poll() -> None:
        result["task"] = worker.poll_workflow_task(timeout=10)
        result["at"] = time.monotonic()

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.5)  # the poll is now waiting on an empty normal queue
    signalled_at = time.monotonic()
    api.post(f"/workflows/{wid}/signal", {"signal_name": "wake"})
    poller.join(15)

    assert "task" in result, "the waiting normal poller never got the task"
    assert float(result["at"]) - signalled_at < 5


def test_live_sticky_poller_keeps_its_task(api: Api, worker: ScriptedWorker) -> None:
    sticky = ScriptedWorker(api, f"{worker.queue}-sticky-live")
    wid, first = _make_sticky(api, worker, sticky.queue)
    r = sticky.api.post(f"/task-queues/{sticky.queue}/workflow-tasks/poll", {"identity": "s", "timeout": 0.2})
    assert r.status_code == 204  # the sticky worker is now a live poller with nothing to do
    api.post(f"/workflows/{wid}/signal", {"signal_name": "wake"})

    r = worker.api.post(f"/task-queues/{worker.queue}/workflow-tasks/poll", {"identity": "n", "timeout": 1.5})
    assert r.status_code == 204, "a normal poller took a task whose sticky poller is live"
    partial = sticky.poll_workflow_task()
    assert partial["history"]["events"][0]["event_id"] == first["started_event_id"] + 1
