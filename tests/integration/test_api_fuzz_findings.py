"""What the API fuzzing (``bench/fuzz_api.py``) found, each kept fixed here.

Each test states the schema's word and the server's answer together, so the two cannot
drift apart again: a status the server can give is documented, an input the schema calls
invalid is refused, an input the schema calls valid is taken.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from namespaces.models import Namespace, Role
from tests.factories import ApiKeyFactory, NamespaceFactory

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
