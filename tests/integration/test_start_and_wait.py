"""A start that waits for its run's close (``wait_for_close``): what ``execute_workflow``
sends, so that a caller who wants the result makes one call, not two.

Against the real PostgreSQL, through the frontend's ASGI application: the answer is held
until the run closes and carries its close page; a wait that ends first answers without
it; a reused run is looked at before waiting; a bad wait is refused and starts nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from history.models import WorkflowExecution
from namespaces.models import Role
from tests import asgi_client
from tests.asgi_client import AsgiResponse, asgi_request
from tests.factories import ApiKeyFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)

START = {"workflow_id": "w", "workflow_type": "T", "task_queue": "q"}


class Client:
    def __init__(self) -> None:
        namespace = NamespaceFactory()
        self.namespace = namespace.name
        self.authorization = ApiKeyFactory(namespace=namespace, roles=[Role.CLIENT]).authorization

    def url(self, path: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}{path}"

    def post(self, path: str, body: dict[str, Any]) -> AsgiResponse:
        return asgi_request("POST", self.url(path), json.dumps(body), authorization=self.authorization)

    def get_close(self) -> dict[str, Any]:
        """The close page of ``w`` as a history read gives it."""
        query = "history_event_filter_type=CLOSE_EVENT"
        answer = asgi_request(
            "GET", self.url("/workflows/w/history"), authorization=self.authorization, query=query
        )
        assert answer.status_code == 200, answer.content
        page: dict[str, Any] = answer.json()
        return page

    async def post_async(self, path: str, body: dict[str, Any]) -> AsgiResponse:
        raw = json.dumps(body).encode()
        return await asgi_client.asgi_call("POST", self.url(path), raw, authorization=self.authorization)


@pytest.fixture
def client() -> Client:
    return Client()


def _start_then_terminate(client: Client, path: str, body: dict[str, Any]) -> tuple[AsgiResponse, float]:
    """Send the waiting start; terminate its run half a second later."""

    async def both() -> tuple[AsgiResponse, float]:
        began = time.monotonic()
        waiting = asyncio.ensure_future(client.post_async(path, body))
        await asyncio.sleep(0.5)
        ended = await client.post_async("/workflows/w/terminate", {"reason": "done"})
        assert ended.status_code == 200, ended.content
        return await waiting, time.monotonic() - began

    return async_to_sync(both)()


def test_a_waiting_start_answers_with_the_runs_close(client: Client) -> None:
    started, took = _start_then_terminate(client, "/workflows", {**START, "wait_for_close": 10})

    assert started.status_code == 201, started.content
    answer = started.json()
    assert answer["started"] is True
    close = answer["close"]
    assert [e["event_type"] for e in close["events"]] == ["WorkflowExecutionTerminated"]
    assert close["status"] == "Terminated" and close["run_id"] == answer["run_id"]
    assert close["new_run_id"] is None
    assert took < 5, "the close notification woke the wait"


def test_a_waiting_signal_with_start_answers_with_the_runs_close(client: Client) -> None:
    body = {**START, "signal_name": "go", "wait_for_close": 10}
    started, _ = _start_then_terminate(client, "/signal-with-start", body)

    assert started.status_code == 200, started.content
    assert started.json()["close"]["status"] == "Terminated"


def test_a_wait_that_ends_first_answers_without_the_close(client: Client) -> None:
    began = time.monotonic()
    started = client.post("/workflows", {**START, "wait_for_close": 0.3})

    assert started.status_code == 201, started.content
    assert "close" not in started.json()
    assert 0.25 < time.monotonic() - began < 3


def test_a_running_run_reused_by_the_start_is_waited_on(client: Client) -> None:
    first = client.post("/workflows", START).json()
    began = time.monotonic()
    reused = client.post("/workflows", {**START, "id_conflict_policy": "USE_EXISTING", "wait_for_close": 0.3})

    assert reused.status_code == 200, reused.content
    assert reused.json()["run_id"] == first["run_id"] and reused.json()["started"] is False
    assert "close" not in reused.json()
    assert time.monotonic() - began > 0.25


def test_a_start_retried_after_its_run_closed_answers_with_the_close_at_once(client: Client) -> None:
    first = client.post("/workflows", {**START, "request_id": "r1"}).json()
    assert client.post("/workflows/w/terminate", {"reason": "done"}).status_code == 200
    began = time.monotonic()

    retried = client.post("/workflows", {**START, "request_id": "r1", "wait_for_close": 10})

    assert retried.json()["run_id"] == first["run_id"]
    assert retried.json()["close"]["status"] == "Terminated"
    assert time.monotonic() - began < 3


@pytest.mark.parametrize("wait", [-1, "soon", None])
def test_a_bad_wait_is_refused_and_starts_nothing(client: Client, wait: Any) -> None:
    refused = client.post("/workflows", {**START, "wait_for_close": wait})

    assert refused.status_code == 400, refused.content
    assert "wait_for_close" in refused.json()["details"]["fields"]
    assert not WorkflowExecution.objects.filter(workflow_id="w").exists()


def test_an_eager_start_cannot_wait_for_its_close() -> None:
    """It would hold its run's first task until the run closed."""
    namespace = NamespaceFactory()
    key = ApiKeyFactory(namespace=namespace, roles=[Role.CLIENT, Role.WORKER])
    body = {**START, "request_eager_execution": True, "wait_for_close": 5}
    path = f"/api/v1/namespaces/{namespace.name}/workflows"

    refused = asgi_request("POST", path, json.dumps(body), authorization=key.authorization)

    assert refused.status_code == 400, refused.content
    assert "wait_for_close" in refused.json()["details"]["fields"]
    assert not WorkflowExecution.objects.filter(workflow_id="w").exists()


def _counting_close_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each read of a run's close by the waiting calls."""
    from executions import lane

    reads: list[str] = []
    real = lane.selectors.run_close

    def counted(*args: Any) -> Any:
        reads.append(args[1])
        return real(*args)

    monkeypatch.setattr(lane.selectors, "run_close", counted)
    return reads


def test_the_close_notification_carries_the_close_so_the_wait_reads_nothing(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _counting_close_reads(monkeypatch)
    started, took = _start_then_terminate(client, "/workflows", {**START, "wait_for_close": 10})

    assert started.status_code == 201, started.content
    assert took < 5 and reads == [], "answered from the notification, with no read of the run"
    # What the notification carried is what a read of the close gives.
    read = client.get_close()
    assert started.json()["close"] == read


def test_a_close_too_big_for_a_notification_is_read(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _counting_close_reads(monkeypatch)

    async def both() -> AsgiResponse:
        waiting = asyncio.ensure_future(client.post_async("/workflows", {**START, "wait_for_close": 10}))
        await asyncio.sleep(0.5)
        ended = await client.post_async("/workflows/w/terminate", {"reason": "r" * 9_000})
        assert ended.status_code == 200, ended.content
        return await waiting

    started = async_to_sync(both)()

    assert started.status_code == 201, started.content
    close = started.json()["close"]
    assert close["events"][0]["attributes"]["reason"] == "r" * 9_000
    assert reads == ["w"], "the bare wake-up sent the wait to read the close"
