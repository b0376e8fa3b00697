"""What the API fuzzing (``bench/fuzz_api.py``) found, each kept fixed here.

Each test states the schema's word and the server's answer together, so the two cannot
drift apart again: a status the server can give is documented, an input the schema calls
invalid is refused, an input the schema calls valid is taken.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from executions.models import BatchJob, BatchState
from history.models import HistoryEvent, Task, TaskKind, WorkflowExecution
from namespaces.models import Namespace, Role, TaskQueueLimit
from tests.asgi_client import AsgiResponse, asgi_request
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory
from tests.integration.test_updates_kernel import idle_run

pytestmark = pytest.mark.django_db

NS = "/api/v1/namespaces/{ns}"


@pytest.fixture
def schema() -> dict[str, Any]:
    response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return dict(json.loads(response.content))


@pytest.fixture
def tenant() -> Namespace:
    return NamespaceFactory()


def call(tenant: Namespace, method: str, path: str, body: Any = None, **query: str) -> Any:
    authorization = ApiKeyFactory(
        namespace=tenant, roles=[Role.CLIENT, Role.WORKER, Role.ADMIN]
    ).authorization
    client = Client(HTTP_AUTHORIZATION=authorization)
    url = NS.format(ns=tenant.name) + path
    if method == "GET":
        return client.get(url, query)
    if query:
        url += "?" + urlencode(query)
    return getattr(client, method.lower())(url, json.dumps(body), content_type="application/json")


def query_parameter(schema: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    parameters = schema["paths"]["/api/v1/namespaces/{namespace}" + path]["get"]["parameters"]
    return dict(next(p["schema"] for p in parameters if p["name"] == name))


def test_a_query_no_worker_answers_is_a_documented_504(schema: dict[str, Any]) -> None:
    for path in ("/workflows/{workflow_id}/query", "/workflows/{workflow_id}/runs/{run_id}/query"):
        responses = schema["paths"]["/api/v1/namespaces/{namespace}" + path]["post"]["responses"]
        assert "504" in responses, path
        assert responses["504"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"
        }


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/task-queues/q1/limits", {"dispatch_rps": False}),
        ("PUT", "/task-queues/q1/limits", {"dispatch_rps": True}),
        ("POST", "/batch-operations", {"operation": "terminate", "query": "", "reason": "r", "rps": True}),
    ],
)
def test_a_boolean_where_the_schema_says_number_is_refused(
    tenant: Namespace, method: str, path: str, body: dict[str, Any]
) -> None:
    answer = call(tenant, method, path, body)
    assert answer.status_code == 400, answer.content
    field = "dispatch_rps" if "dispatch_rps" in body else "rps"
    assert field in answer.json()["details"]["fields"]


def test_a_number_where_the_schema_says_number_is_still_taken(tenant: Namespace) -> None:
    answer = call(tenant, "PUT", "/task-queues/q1/limits", {"dispatch_rps": 2})
    assert answer.status_code == 200, answer.content


@pytest.mark.parametrize(("path", "name"), [("/schedules", "cursor"), ("/workflow-count", "group_by")])
def test_an_empty_parameter_the_server_takes_is_valid_in_the_schema(
    schema: dict[str, Any], tenant: Namespace, path: str, name: str
) -> None:
    assert "minLength" not in query_parameter(schema, path, name)
    answer = call(tenant, "GET", path, **{name: ""})
    assert answer.status_code == 200, answer.content


# The lean lane's bodies take a JSON value only of its field's type (they are the schema).

START = {"workflow_id": "w", "workflow_type": "T", "task_queue": "q"}
EAGER_BODIES = [
    ("/workflows", START),
    ("/signal-with-start", {**START, "signal_name": "s"}),
    ("/update-with-start", {"start": START, "update": {"name": "u", "timeout": 0}}),
]


def lane(tenant: Namespace, method: str, path: str, body: Any = None, query: str = "") -> AsgiResponse:
    """A call through the frontend's ASGI application, as the lean lane answers it."""
    authorization = ApiKeyFactory(
        namespace=tenant, roles=[Role.CLIENT, Role.WORKER, Role.ADMIN]
    ).authorization
    content = json.dumps(body) if body is not None else b""
    return asgi_request(
        method, NS.format(ns=tenant.name) + path, content, authorization=authorization, query=query
    )


def with_eager(path: str, body: dict[str, Any], value: Any) -> dict[str, Any]:
    if path == "/update-with-start":
        return {**body, "start": {**body["start"], "request_eager_execution": value}}
    return {**body, "request_eager_execution": value}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("path", "body"), EAGER_BODIES)
@pytest.mark.parametrize("eager", [0, 1, "true", "false"])
def test_a_start_whose_eager_flag_is_not_a_boolean_is_refused_and_starts_nothing(
    tenant: Namespace, path: str, body: dict[str, Any], eager: Any
) -> None:
    answer = lane(tenant, "POST", path, with_eager(path, body, eager))
    assert answer.status_code == 400, answer.content
    fields = answer.json()["details"]["fields"]
    if path == "/update-with-start":
        fields = fields["start"]
    assert fields == {"request_eager_execution": ["Must be a valid boolean."]}
    assert not WorkflowExecution.objects.filter(namespace=tenant).exists()


@pytest.mark.django_db(transaction=True)
def test_a_number_sent_as_text_in_a_lane_body_is_refused(tenant: Namespace) -> None:
    answer = lane(tenant, "POST", "/workflows", {**START, "task_timeout": "5"})
    assert answer.status_code == 400, answer.content
    assert answer.json()["details"]["fields"] == {"task_timeout": ["A valid number is required."]}
    assert not WorkflowExecution.objects.filter(namespace=tenant).exists()


@pytest.mark.django_db(transaction=True)
def test_a_boolean_start_is_still_taken(tenant: Namespace) -> None:
    answer = lane(tenant, "POST", "/workflows", with_eager("/workflows", START, False))
    assert answer.status_code in (200, 201), answer.content


# The polls: one struct decodes the body and is the schema's PollRequest.


def poll_request(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema["components"]["schemas"]["PollRequest"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["workflow", "activity"])
def test_a_poll_identity_past_its_length_is_refused_and_claims_nothing(tenant: Namespace, kind: str) -> None:
    task_kind = TaskKind.WORKFLOW if kind == "workflow" else TaskKind.ACTIVITY
    ExecutionFactory(namespace=tenant, task_queue="q")
    queued = Task.objects.filter(namespace=tenant, task_queue="q", kind=task_kind).count()
    path = f"/task-queues/q/{kind}-tasks/poll"
    answer = lane(tenant, "POST", path, {"identity": "w" * 1001, "timeout": 0.1})
    assert answer.status_code == 400, answer.content
    assert answer.json()["details"]["fields"] == {
        "identity": ["Ensure this field has no more than 1000 characters."]
    }
    assert Task.objects.filter(namespace=tenant, task_queue="q", kind=task_kind).count() == queued


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("body", "field"),
    [({"timeout": "1"}, "timeout"), ({"timeout": True}, "timeout"), ({"max_tasks": 1.0}, "max_tasks")],
)
def test_a_poll_value_not_of_its_type_is_refused(tenant: Namespace, body: dict[str, Any], field: str) -> None:
    answer = lane(tenant, "POST", "/task-queues/q/workflow-tasks/poll", body)
    assert answer.status_code == 400, answer.content
    assert list(answer.json()["details"]["fields"]) == [field]


@pytest.mark.django_db(transaction=True)
def test_a_poll_without_a_build_may_say_so_with_null_as_its_schema_does(
    schema: dict[str, Any], tenant: Namespace
) -> None:
    described = poll_request(schema)["properties"]
    assert described["identity"]["maxLength"] == 1000
    assert described["worker_version_capabilities"]["nullable"] is True
    body = {"identity": "w", "timeout": 0.1, "worker_version_capabilities": None}
    answer = lane(tenant, "POST", "/task-queues/q/workflow-tasks/poll", body)
    assert answer.status_code == 204, answer.content


# A query parameter sent empty is read as left out, and the schema says so.

EMPTY_AS_ABSENT = [
    ("/workflows/{workflow_id}/history", "run_id"),
    ("/workflows/{workflow_id}/runs/{run_id}/history", "run_id"),
    ("/workflows/{workflow_id}/updates/{update_id}", "timeout"),
    ("/workflows/{workflow_id}/reset-preview", "event_id"),
    ("/workflows/{workflow_id}/runs/{run_id}/reset-preview", "reapply_signals"),
]


@pytest.mark.parametrize(("path", "name"), EMPTY_AS_ABSENT)
def test_the_schema_lets_an_optional_query_parameter_be_empty(
    schema: dict[str, Any], path: str, name: str
) -> None:
    parameters = schema["paths"]["/api/v1/namespaces/{namespace}" + path]["get"]["parameters"]
    assert next(p for p in parameters if p["name"] == name and p["in"] == "query")["allowEmptyValue"] is True


def test_a_list_query_parameter_is_not_said_to_take_an_empty_value(schema: dict[str, Any]) -> None:
    path = "/api/v1/namespaces/{namespace}/workflows/{workflow_id}/reset-preview"
    parameters = schema["paths"][path]["get"]["parameters"]
    listed = next(p for p in parameters if p["name"] == "reset_reapply_exclude_types")
    assert "allowEmptyValue" not in listed


@pytest.mark.django_db(transaction=True)
def test_an_empty_run_id_reads_the_latest_run_history(tenant: Namespace) -> None:
    run = ExecutionFactory(namespace=tenant, task_queue="q")
    answer = lane(tenant, "GET", f"/workflows/{run.workflow_id}/history", query="run_id=")
    assert answer.status_code == 200, answer.content
    assert answer.json()["run_id"] == str(run.run_id)


def test_an_empty_reset_preview_parameter_is_its_default() -> None:
    run = idle_run()
    query = {"reset_type": "FirstWorkflowTask", "event_id": "", "reapply_signals": ""}
    path = f"/api/v1/namespaces/{run.namespace.name}/workflows/{run.workflow_id}/reset-preview"
    key = ApiKeyFactory(namespace=run.namespace)
    answer = Client(HTTP_AUTHORIZATION=key.authorization).get(path, query)
    assert answer.status_code == 200, answer.content
    assert answer.json()["reapply_signals"] is True


# A reason is measured as sent: its whitespace counts towards its maxLength.


def test_a_queue_limit_removal_with_a_reason_past_its_length_is_refused(tenant: Namespace) -> None:
    assert call(tenant, "PUT", "/task-queues/q1/limits", {"dispatch_rps": 2}).status_code == 200
    answer = call(tenant, "DELETE", "/task-queues/q1/limits", reason="r" + "\x0b" * 2000)
    assert answer.status_code == 400, answer.content
    assert "reason" in answer.json()["details"]["fields"]
    assert TaskQueueLimit.objects.filter(namespace=tenant, task_queue="q1").exists()


def test_a_batch_stop_with_a_reason_past_its_length_is_refused(tenant: Namespace) -> None:
    created = call(
        tenant, "POST", "/batch-operations", {"operation": "terminate", "query": "", "reason": "r"}
    )
    assert created.status_code in (200, 201), created.content
    job_id = created.json()["job_id"]
    answer = call(tenant, "POST", f"/batch-operations/{job_id}/stop", {"reason": "r" + " " * 10_000})
    assert answer.status_code == 400, answer.content
    assert "reason" in answer.json()["details"]["fields"]
    assert BatchJob.objects.get(namespace=tenant, job_id=job_id).state == BatchState.RUNNING


@pytest.mark.parametrize("path", ["/workflows/w/terminate", "/workflows/w/runs/{run_id}/terminate"])
def test_a_terminate_with_a_reason_past_its_length_is_refused_and_terminates_nothing(
    tenant: Namespace, path: str
) -> None:
    run = ExecutionFactory(namespace=tenant, workflow_id="w")
    answer = call(tenant, "POST", path.format(run_id=run.run_id), {"reason": "r" + "\t" * 10_000})
    assert answer.status_code == 400, answer.content
    assert "reason" in answer.json()["details"]["fields"]
    run.refresh_from_db()
    assert run.status == "Running"


# Only an empty body means no fields: whitespace alone is no JSON document.


@pytest.mark.parametrize("raw", ["\t", "\x0c", " \n"])
def test_a_body_of_whitespace_alone_is_malformed_and_cancels_nothing(tenant: Namespace, raw: str) -> None:
    run = ExecutionFactory(namespace=tenant, workflow_id="w")
    authorization = ApiKeyFactory(namespace=tenant, roles=[Role.CLIENT]).authorization
    url = NS.format(ns=tenant.name) + "/workflows/w/cancel"
    answer = Client(HTTP_AUTHORIZATION=authorization).post(url, raw, content_type="application/json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "malformed_request"
    assert not HistoryEvent.objects.filter(run=run, event_type="WorkflowExecutionCancelRequested").exists()
    empty = Client(HTTP_AUTHORIZATION=authorization).post(url, "", content_type="application/json")
    assert empty.status_code == 200, empty.content


@pytest.mark.django_db(transaction=True)
def test_a_lane_body_of_whitespace_alone_is_malformed(tenant: Namespace) -> None:
    ExecutionFactory(namespace=tenant, workflow_id="w")
    answer = lane(tenant, "POST", "/workflows/w/signal", None)
    assert answer.status_code == 400  # no signal_name: the empty body is no fields
    authorization = ApiKeyFactory(namespace=tenant, roles=[Role.CLIENT]).authorization
    blank = asgi_request(
        "POST", NS.format(ns=tenant.name) + "/workflows/w/signal", "\t", authorization=authorization
    )
    assert blank.status_code == 400, blank.content
    assert blank.json()["code"] == "malformed_request"
