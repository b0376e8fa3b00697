"""The client's hot calls on the lean lane — start, signal-with-start, signal, history —
give the answers the DRF views gave, against the real PostgreSQL.

The expected field errors are the ones the DRF serializers produced for the same bodies
and query strings, word for word. Requests go through the frontend's ASGI application.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from namespaces.models import Role
from tests import asgi_client
from tests.asgi_client import AsgiResponse, asgi_request
from tests.factories import ApiKeyFactory, NamespaceFactory

# The lane runs on the API's thread pool (its own database connections): rows are committed.
pytestmark = pytest.mark.django_db(transaction=True)

START = {"workflow_id": "w", "workflow_type": "T", "task_queue": "q"}
LONG = "x" * 1001
MAX_1000 = ["Ensure this field has no more than 1000 characters."]
NULL = ["This field may not be null."]
REQUIRED = ["This field is required."]

# (path under the namespace, bad body, the DRF views' field errors for it)
BAD_BODIES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("/workflows", {}, {"workflow_id": REQUIRED, "workflow_type": REQUIRED, "task_queue": REQUIRED}),
    (
        "/workflows",
        {"workflow_id": 5, "workflow_type": "  ", "task_queue": LONG},
        {
            "workflow_id": ["Not a valid string."],
            "workflow_type": ["This field may not be blank."],
            "task_queue": MAX_1000,
        },
    ),
    (
        "/workflows",
        {**START, "id_reuse_policy": "NOPE", "id_conflict_policy": 3},
        {
            "id_reuse_policy": ['"NOPE" is not a valid choice.'],
            "id_conflict_policy": ['"3" is not a valid choice.'],
        },
    ),
    (
        "/workflows",
        {**START, "id_reuse_policy": "", "id_conflict_policy": ""},
        {"id_reuse_policy": ['"" is not a valid choice.']},
    ),
    (
        "/workflows",
        {**START, "execution_timeout": -1, "task_timeout": "x", "start_delay": None},
        {
            "execution_timeout": ["Ensure this value is greater than or equal to 0."],
            "task_timeout": ["A valid number is required."],
            "start_delay": NULL,
        },
    ),
    (
        "/workflows",
        {**START, "input": 5, "memo": [], "search_attributes": None, "retry_policy": 3},
        {
            "input": ['Expected a list of items but got type "int".'],
            "memo": ['Expected a dictionary of items but got type "list".'],
            "search_attributes": NULL,
            "retry_policy": ['Expected a dictionary of items but got type "int".'],
        },
    ),
    (
        "/workflows",
        {**START, "input": None, "request_eager_execution": "maybe", "cron_schedule": 7},
        {
            "input": NULL,
            "cron_schedule": ["Not a valid string."],
            "request_eager_execution": ["Must be a valid boolean."],
        },
    ),
    (
        "/signal-with-start",
        {**START, "signal_input": {}},
        {"signal_name": REQUIRED, "signal_input": ['Expected a list of items but got type "dict".']},
    ),
    (
        "/workflows/w/signal",
        {"input": "x", "identity": 5, "request_id": LONG},
        {
            "signal_name": REQUIRED,
            "input": ['Expected a list of items but got type "str".'],
            "request_id": MAX_1000,
            "identity": ["Not a valid string."],
        },
    ),
    ("/workflows/w/signal", {"signal_name": ""}, {"signal_name": ["This field may not be blank."]}),
]
BAD_QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("page_size=0", {"page_size": ["Ensure this value is greater than or equal to 1."]}),
    (
        "page_size=257&after_event_id=-1",
        {
            "after_event_id": ["Ensure this value is greater than or equal to 0."],
            "page_size": ["Ensure this value is less than or equal to 256."],
        },
    ),
    (
        "after_event_id=x&timeout=-2",
        {
            "after_event_id": ["A valid integer is required."],
            "timeout": ["Ensure this value is greater than or equal to 0."],
        },
    ),
    ("run_id=not-a-uuid", {"run_id": ["Must be a valid UUID."]}),
    (
        "history_event_filter_type=NOPE&wait_new_event=maybe",
        {
            "wait_new_event": ["Must be a valid boolean."],
            "history_event_filter_type": ['"NOPE" is not a valid choice.'],
        },
    ),
]
BODY_PATHS = ["/workflows", "/signal-with-start", "/workflows/w/signal"]


class Client:
    def __init__(self, roles: list[str] | None = None) -> None:
        namespace = NamespaceFactory()
        self.namespace = namespace.name
        key = ApiKeyFactory(namespace=namespace, roles=roles or [Role.CLIENT, Role.WORKER])
        self.authorization = key.authorization

    def url(self, path: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}{path}"

    def post(self, path: str, content: bytes | str | dict[str, Any]) -> AsgiResponse:
        raw = json.dumps(content) if isinstance(content, dict) else content
        return asgi_request("POST", self.url(path), raw, authorization=self.authorization)

    def get(self, path: str, query: str = "") -> AsgiResponse:
        return asgi_request("GET", self.url(path), authorization=self.authorization, query=query)


@pytest.fixture
def client() -> Client:
    return Client()


def _error(response: AsgiResponse, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


@pytest.mark.parametrize(("path", "body", "fields"), BAD_BODIES)
def test_a_bad_body_gets_the_field_errors_it_always_got(
    client: Client, path: str, body: dict[str, Any], fields: dict[str, Any]
) -> None:
    refused = _error(client.post(path, body), 400, "invalid_argument")
    assert refused == {
        "code": "invalid_argument",
        "message": "invalid request",
        "details": {"fields": fields},
    }


@pytest.mark.parametrize(("query", "fields"), BAD_QUERIES)
def test_a_bad_history_query_gets_the_field_errors_it_always_got(
    client: Client, query: str, fields: dict[str, Any]
) -> None:
    assert client.post("/workflows", START).status_code == 201
    refused = _error(client.get("/workflows/w/history", query), 400, "invalid_argument")
    assert refused["details"] == {"fields": fields}


@pytest.mark.parametrize("path", BODY_PATHS)
def test_the_strict_checks_hold(client: Client, path: str) -> None:
    _error(client.post(path, '{"signal_name": "a\\u0000"}'), 400, "malformed_request")
    _error(client.post(path, "[1, 2]"), 400, "malformed_request")
    _error(client.post(path, '"text"'), 400, "malformed_request")
    _error(client.post(path, '{"workflow_id": '), 400, "malformed_request")
    _error(client.post(path, "[" * 70 + "]" * 70), 400, "malformed_request")
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        _error(client.post(path, {"input": ["x" * 2000]}), 413, "payload_too_large")


@pytest.mark.parametrize("path", BODY_PATHS)
def test_keys_roles_and_namespaces_are_checked_before_the_body(path: str) -> None:
    worker_only = Client(roles=[Role.WORKER])
    assert _error(worker_only.post(path, "not json"), 403, "permission_denied")
    other = Client()
    foreign = asgi_request("POST", other.url(path), "not json", authorization=Client().authorization)
    assert foreign.json()["message"] == f"namespace {other.namespace!r} not found"
    _error(foreign, 404, "not_found")
    _error(asgi_request("POST", other.url(path), "not json"), 401, "unauthenticated")


def test_methods_and_nul_in_the_path(client: Client) -> None:
    refused = _error(client.get("/signal-with-start"), 405, "method_not_allowed")
    assert refused["message"] == 'Method "GET" not allowed.'
    _error(client.post("/workflows/w/history", {}), 405, "method_not_allowed")
    _error(client.post("/workflows/w\x00/signal", {"signal_name": "s"}), 400, "invalid_argument")
    listed = client.get("/workflows")  # the list stays a DRF view
    assert listed.status_code == 200 and listed.json()["executions"] == []


def test_start_signal_and_history_answer_as_before(client: Client) -> None:
    started = client.post("/workflows", {**START, "input": [1], "request_id": "r1"})
    assert started.status_code == 201
    run_id = started.json()["run_id"]
    assert started.json() == {"run_id": run_id, "started": True}
    again = client.post("/workflows", {**START, "id_conflict_policy": "USE_EXISTING"})
    assert again.status_code == 200 and again.json() == {"run_id": run_id, "started": False}
    assert client.post("/workflows/w/signal", {"signal_name": "go"}).content == b"{}"
    assert client.post(f"/workflows/w/runs/{run_id}/signal", {"signal_name": "go"}).content == b"{}"
    _error(client.post("/workflows/nope/signal", {"signal_name": "go"}), 404, "not_found")
    page = client.get("/workflows/w/history", "page_size=2")
    assert page.status_code == 200
    assert [e["event_id"] for e in page.json()["events"]] == [1, 2]
    assert page.json()["next_after_event_id"] == 2 and page.json()["run_id"] == run_id
    rest = client.get(f"/workflows/w/runs/{run_id}/history", "after_event_id=2").json()
    assert [e["event_type"] for e in rest["events"]][-2:] == ["WorkflowExecutionSignaled"] * 2
    clash = client.get(f"/workflows/w/runs/{run_id}/history", "run_id=8c1d52a4-2b3e-4a55-9a0b-3c3f1e7f0c11")
    assert (
        _error(clash, 400, "invalid_argument")["message"]
        == "run_id in the query differs from the run in the path"
    )
    closed = client.get("/workflows/w/history", "history_event_filter_type=CLOSE_EVENT").json()
    assert closed["events"] == [] and closed["status"] == "Running" and closed["next_after_event_id"] is None
    both = client.post("/signal-with-start", {**START, "signal_name": "s"})
    assert both.status_code == 200 and both.json() == {"run_id": run_id, "started": False}


def test_eager_start_needs_the_worker_role_and_hands_back_the_first_task() -> None:
    client_only = Client(roles=[Role.CLIENT])
    refused = _error(
        client_only.post("/workflows", {**START, "request_eager_execution": True}), 403, "permission_denied"
    )
    assert refused["message"] == "eager start needs the 'worker' role"
    both = Client()
    started = both.post("/workflows", {**START, "request_eager_execution": True})
    assert started.status_code == 201
    assert started.json()["eager_workflow_task"]["task_token"]


def test_a_waiting_history_read_wakes_on_the_signal_and_holds_no_pool_thread(client: Client) -> None:
    """The wait is on the event loop: with a pool of one thread, a signal sent while the
    read waits is answered, and wakes the read with the new event."""
    assert client.post("/workflows", START).status_code == 201
    last = client.get("/workflows/w/history").json()["events"][-1]["event_id"]
    from chronicle import asgi

    async def both() -> tuple[AsgiResponse, AsgiResponse, float]:
        began = time.monotonic()
        waiting = asyncio.ensure_future(
            asgi_client.asgi_call(
                "GET",
                client.url("/workflows/w/history"),
                authorization=client.authorization,
                query=f"after_event_id={last}&wait_new_event=true&timeout=10",
            )
        )
        await asyncio.sleep(0.5)
        signal = client.url("/workflows/w/signal")
        signalled = await asgi_client.asgi_call(
            "POST", signal, b'{"signal_name": "x"}', authorization=client.authorization
        )
        return await waiting, signalled, time.monotonic() - began

    with pytest.MonkeyPatch.context() as patch:
        from concurrent.futures import ThreadPoolExecutor

        patch.setattr(asgi, "API_THREADS", ThreadPoolExecutor(max_workers=1))
        read, signalled, took = async_to_sync(both)()
    assert signalled.status_code == 200
    assert read.status_code == 200, read.content
    assert [e["event_type"] for e in read.json()["events"]] == ["WorkflowExecutionSignaled"]
    assert took < 5


def test_a_history_wait_ends_at_the_callers_timeout(client: Client) -> None:
    assert client.post("/workflows", START).status_code == 201
    began = time.monotonic()
    page = client.get("/workflows/w/history", "after_event_id=100&wait_new_event=true&timeout=0.3").json()
    assert page["events"] == [] and 0.25 < time.monotonic() - began < 3
    began = time.monotonic()
    closed = client.get(
        "/workflows/w/history", "history_event_filter_type=CLOSE_EVENT&wait_new_event=1&timeout=0.3"
    )
    assert closed.json()["events"] == [] and 0.25 < time.monotonic() - began < 3


def test_a_close_wait_is_woken_by_the_close_and_answers_with_the_close_event(client: Client) -> None:
    """What ``result()`` sends: the wait wakes on the run's close and answers with the close
    event, its status and no cursor; a second read of the closed run answers at once."""
    run_id = client.post("/workflows", START).json()["run_id"]
    query = "history_event_filter_type=CLOSE_EVENT&wait_new_event=true&timeout=10"

    async def wait_then_close() -> tuple[AsgiResponse, float]:
        began = time.monotonic()
        waiting = asyncio.ensure_future(
            asgi_client.asgi_call(
                "GET", client.url("/workflows/w/history"), authorization=client.authorization, query=query
            )
        )
        await asyncio.sleep(0.5)
        terminate = client.url(f"/workflows/w/runs/{run_id}/terminate")
        ended = await asgi_client.asgi_call(
            "POST", terminate, b'{"reason": "done"}', authorization=client.authorization
        )
        assert ended.status_code == 200, ended.content
        return await waiting, time.monotonic() - began

    read, took = async_to_sync(wait_then_close)()
    assert read.status_code == 200, read.content
    answer = read.json()
    assert [e["event_type"] for e in answer["events"]] == ["WorkflowExecutionTerminated"]
    assert answer["status"] == "Terminated" and answer["run_id"] == run_id
    assert answer["next_after_event_id"] is None and answer["new_run_id"] is None
    assert took < 5
    again = client.get(f"/workflows/w/runs/{run_id}/history", query).json()
    assert again["events"] == answer["events"]
    unknown = client.get("/workflows/nobody/history", "history_event_filter_type=CLOSE_EVENT")
    assert _error(unknown, 404, "not_found")
