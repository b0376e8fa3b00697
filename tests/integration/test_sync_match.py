"""Sync match: a start hands its run's first workflow task to a poll waiting in its process.

Through the frontend's ASGI application on the real PostgreSQL: the poll answers with the
task the start's own transaction started for it (no task row written), and the task
completes as any other; a start that starts no task sends its taken poll back to waiting;
a start with no poll waiting, or only a versioned one, queues its task as before.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from history.kernel.wakeups import task_wakeup_key
from history.models import ExecutionStatus, HistoryEvent, Task, TaskKind, WorkflowExecution
from matching.sync_match import waiting_polls
from namespaces.models import Namespace
from tests.asgi_client import AsgiResponse, asgi_call, asgi_post

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "matched"


def _poll_url(namespace: Namespace) -> str:
    return f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}/workflow-tasks/poll"


def _key(namespace: Namespace, build_id: str = "") -> str:
    return task_wakeup_key(namespace.id, TaskKind.WORKFLOW, QUEUE, build_id)


def _start_body(**extra: Any) -> bytes:
    body = {"workflow_id": f"wf-{uuid.uuid4().hex[:8]}", "workflow_type": "Order", "task_queue": QUEUE}
    return json.dumps({**body, **extra}).encode()


async def _poll_then_start(
    namespace: Namespace, authorization: str, poll: dict[str, Any], start: bytes, *, key: str
) -> tuple[AsgiResponse, AsgiResponse]:
    """Poll, and once the poll waits (on offer under ``key``, or for a while), start."""
    raw = json.dumps({"identity": "w1", **poll}).encode()
    polling = asyncio.ensure_future(asgi_call("POST", _poll_url(namespace), raw, authorization=authorization))
    for _ in range(100):
        if waiting_polls.waiting(key):
            break
        await asyncio.sleep(0.02)
    url = f"/api/v1/namespaces/{namespace.name}/workflows"
    started = await asgi_call("POST", url, start, authorization=authorization)
    return started, await asyncio.wait_for(polling, 10)


def test_the_waiting_poll_gets_the_new_runs_first_task_from_the_start_itself(
    namespace: Namespace, authorization: str
) -> None:
    started, polled = async_to_sync(_poll_then_start)(
        namespace, authorization, {"timeout": 10}, _start_body(), key=_key(namespace)
    )

    assert started.status_code == 201, started.content
    assert "eager_workflow_task" not in started.json(), "the task went to the poll, not the caller"
    assert polled.status_code == 200, polled.content
    task = polled.json()
    run_id = started.json()["run_id"]
    assert task["workflow_execution"]["run_id"] == run_id
    last = task["history"]["events"][-1]
    assert last["event_type"] == "WorkflowTaskStarted"
    assert (last["attributes"]["identity"], last["attributes"]["request_id"]) == ("w1", "matched")
    assert not Task.objects.filter(run_id=run_id).exists(), "no task row: the start started it"
    assert waiting_polls.waiting(_key(namespace)) == 0

    complete = f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}/workflow-tasks/complete"
    close = {"command_type": "CompleteWorkflowExecution", "attributes": {"result": 1}}
    done = asgi_post(
        complete, {"task_token": task["task_token"], "commands": [close]}, authorization=authorization
    )
    assert done.status_code == 200, done.content
    assert WorkflowExecution.objects.get(run_id=run_id).status == ExecutionStatus.COMPLETED


def test_a_start_that_starts_no_task_sends_its_poll_back_to_waiting(
    namespace: Namespace, authorization: str
) -> None:
    # A delayed start schedules its first task later: the poll it took gets nothing now.
    started, polled = async_to_sync(_poll_then_start)(
        namespace, authorization, {"timeout": 2}, _start_body(start_delay=60), key=_key(namespace)
    )

    assert started.status_code == 201, started.content
    assert polled.status_code == 204, "the poll waited on, and its timeout ended it empty"
    run_id = started.json()["run_id"]
    kinds = HistoryEvent.objects.filter(run_id=run_id).values_list("event_type", flat=True)
    assert "WorkflowTaskStarted" not in kinds
    assert waiting_polls.waiting(_key(namespace)) == 0


def test_a_versioned_poll_is_not_offered_and_the_task_is_queued(
    namespace: Namespace, authorization: str
) -> None:
    versioned = {"timeout": 1, "worker_version_capabilities": {"build_id": "b1", "use_versioning": True}}
    started, polled = async_to_sync(_poll_then_start)(
        namespace, authorization, versioned, _start_body(), key=_key(namespace, "b1")
    )

    assert started.status_code == 201 and polled.status_code == 204
    assert Task.objects.filter(run_id=started.json()["run_id"]).count() == 1, "queued as before"
