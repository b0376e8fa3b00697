"""ResetStickyTaskQueue on the lean lane: on its own and as a call of a batch of reports.

Through the frontend's ASGI application on the real PostgreSQL (the lane's own threads
and connections, hence transactional test databases): checked as the token calls are
(the key, the worker role, the body), a run of another namespace or queue refused as an
unknown task, and a normal poll that waits woken by the task the reset moves.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from pytest_django.fixtures import SettingsWrapper

from history.models import WorkflowExecution
from namespaces.models import Namespace
from tests import asgi_client
from tests.asgi_client import AsgiResponse, asgi_post
from tests.factories import ApiKeyFactory, NamespaceFactory
from tests.integration.test_reset_sticky_task_queue import QUEUE, STICKY, signal, state, sticky_run

pytestmark = pytest.mark.django_db(transaction=True)


def _url(namespace: Namespace, tail: str, queue: str = QUEUE) -> str:
    return f"/api/v1/namespaces/{namespace.name}/task-queues/{queue}/{tail}"


def _reset(namespace: Namespace, authorization: str, body: Any, queue: str = QUEUE) -> AsgiResponse:
    return asgi_post(_url(namespace, "reset-sticky-task-queue", queue), body, authorization=authorization)


def _body(run: WorkflowExecution) -> dict[str, str]:
    return {"workflow_id": run.workflow_id, "run_id": str(run.run_id)}


def test_a_reset_wakes_a_waiting_normal_poll_with_the_whole_history(
    namespace: Namespace, authorization: str, settings: SettingsWrapper
) -> None:
    settings.CHRONICLE_SAFETY_RECHECK_SECONDS = 30  # only the reset's wake-up can answer in time
    run = sticky_run(namespace)
    signal(run)

    async def poll_while_reset() -> tuple[AsgiResponse, AsgiResponse, float]:
        raw = json.dumps({"identity": "w2", "timeout": 20}).encode()
        polling = asyncio.ensure_future(
            asgi_client.asgi_call(
                "POST", _url(namespace, "workflow-tasks/poll"), raw, authorization=authorization
            )
        )
        await asyncio.sleep(0.5)  # the poll now waits on the empty normal queue
        began = time.monotonic()
        reset = await asgi_client.asgi_call(
            "POST",
            _url(namespace, "reset-sticky-task-queue"),
            json.dumps(_body(run)).encode(),
            authorization=authorization,
        )
        return reset, await asyncio.wait_for(polling, 15), time.monotonic() - began

    reset, polled, took = async_to_sync(poll_while_reset)()

    assert (reset.status_code, reset.json()) == (200, {})
    assert polled.status_code == 200, polled.content
    assert took < 5, "the waiting poll was woken"
    task = polled.json()
    assert task["workflow_execution"]["run_id"] == str(run.run_id)
    assert task["history"]["events"][0]["event_id"] == 1, "the whole history"
    assert WorkflowExecution.objects.get(run_id=run.run_id).sticky_task_queue == ""


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"workflow_id": "w"}, "run_id"),
        ({"workflow_id": "w", "run_id": "not-a-uuid"}, "run_id"),
        ({"workflow_id": "", "run_id": "00000000-0000-0000-0000-000000000001"}, "workflow_id"),
        ({"workflow_id": "w" * 1001, "run_id": "00000000-0000-0000-0000-000000000001"}, "workflow_id"),
        ({"workflow_id": "w", "run_id": "00000000-0000-0000-0000-000000000001", "extra": 1}, "extra"),
    ],
)
def test_a_bad_body_is_refused_and_changes_nothing(
    namespace: Namespace, authorization: str, body: dict[str, Any], field: str
) -> None:
    run = sticky_run(namespace)
    signal(run)
    before = state(run)
    if "run_id" in body and field != "run_id":
        body["run_id"] = str(run.run_id)

    r = _reset(namespace, authorization, body)

    assert r.status_code == 400, r.content
    assert field in r.json()["details"]["fields"]
    assert state(run) == before


def test_a_run_of_another_namespace_or_queue_is_refused_as_an_unknown_task(
    namespace: Namespace, authorization: str
) -> None:
    foreign = sticky_run(NamespaceFactory())
    own = sticky_run(namespace)
    for run in (foreign, own):
        signal(run)
    before = [state(foreign), state(own)]
    unknown = {"code": "not_found", "message": "task not found"}

    other_namespace = _reset(namespace, authorization, _body(foreign))
    other_queue = _reset(namespace, authorization, _body(own), queue=STICKY)

    assert (other_namespace.status_code, other_namespace.json()) == (404, unknown)
    assert (other_queue.status_code, other_queue.json()) == (404, unknown)
    assert [state(foreign), state(own)] == before


def test_a_reset_needs_a_worker_key_of_the_namespace(namespace: Namespace) -> None:
    run = sticky_run(namespace)
    before = state(run)
    client_only = ApiKeyFactory(namespace=namespace, roles=["client"]).authorization

    assert _reset(namespace, "Bearer nope", _body(run)).status_code == 401
    assert _reset(namespace, client_only, _body(run)).status_code == 403
    assert state(run) == before


def test_a_reset_in_a_batch_is_answered_and_written_as_alone(
    namespace: Namespace, authorization: str
) -> None:
    first, second = sticky_run(namespace), sticky_run(namespace)
    signal(first)
    second_before = state(second)
    reports = [
        {"kind": "reset-sticky-task-queue", "body": _body(first)},
        {"kind": "reset-sticky-task-queue", "body": {**_body(second), "run_id": "nope"}},
        {"kind": "reset-sticky-task-queue", "body": _body(first)},  # again: nothing to do
    ]

    r = asgi_post(_url(namespace, "responses"), {"responses": reports}, authorization=authorization)

    assert r.status_code == 200, r.content
    answers = r.json()["responses"]
    assert [(a["status"], a["body"].get("code")) for a in answers] == [
        (200, None),
        (400, "invalid_argument"),
        (200, None),
    ]
    moved = WorkflowExecution.objects.get(run_id=first.run_id)
    assert (moved.sticky_task_queue, moved.wft_task_queue) == ("", QUEUE)
    assert state(second) == second_before


def test_the_schema_documents_the_reset_for_workers() -> None:
    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"][
        "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/reset-sticky-task-queue"
    ]
    post = operation["post"]
    assert post["tags"] == ["worker"]
    name = post["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    body = schema["components"]["schemas"][name]
    assert set(body["required"]) == {"workflow_id", "run_id"}
    assert body["properties"]["run_id"]["format"] == "uuid"
    assert body["additionalProperties"] is False
