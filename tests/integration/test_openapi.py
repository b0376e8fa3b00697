"""The served OpenAPI document describes real request bodies, errors and auth."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

NS = "/api/v1/namespaces/{namespace}"
QUEUE = NS + "/task-queues/{task_queue}"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi+json")
    return dict(response.json())


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    name = ref.removeprefix("#/components/schemas/")
    return dict(schema["components"]["schemas"][name])


def request_schema(schema: dict[str, Any], path: str) -> dict[str, Any]:
    operation = schema["paths"][path]["post"]
    return resolve(schema, operation["requestBody"]["content"]["application/json"]["schema"])


@pytest.mark.parametrize(
    ("path", "required"),
    [
        (NS + "/workflows", {"workflow_id", "workflow_type", "task_queue"}),
        (NS + "/workflows/{workflow_id}/signal", {"signal_name"}),
        (QUEUE + "/workflow-tasks/complete", {"task_token"}),
        (QUEUE + "/activity-tasks/heartbeat", {"task_token"}),
    ],
)
def test_request_bodies_list_their_required_fields(
    schema: dict[str, Any], path: str, required: set[str]
) -> None:
    body = request_schema(schema, path)
    assert set(body["required"]) == required
    assert required <= set(body["properties"])


def test_start_documents_its_options(schema: dict[str, Any]) -> None:
    properties = request_schema(schema, NS + "/workflows")["properties"]
    assert {"input", "request_id", "id_reuse_policy", "id_conflict_policy", "memo"} <= set(properties)


def test_workflow_task_complete_takes_commands(schema: dict[str, Any]) -> None:
    properties = request_schema(schema, QUEUE + "/workflow-tasks/complete")["properties"]
    assert properties["commands"]["type"] == "array"


@pytest.mark.parametrize(("kind", "task"), [("workflow", "WorkflowTask"), ("activity", "ActivityTask")])
def test_polls_take_a_body_and_return_a_task(schema: dict[str, Any], kind: str, task: str) -> None:
    path = QUEUE + f"/{kind}-tasks/poll"
    assert set(request_schema(schema, path)["properties"]) == {
        "identity",
        "timeout",
        "worker_version_capabilities",
        "max_tasks",
    }
    responses = schema["paths"][path]["post"]["responses"]
    one, many = responses["200"]["content"]["application/json"]["schema"]["oneOf"]
    returned = resolve(schema, one)
    assert returned == schema["components"]["schemas"][task]
    assert "task_token" in returned["properties"]
    assert resolve(schema, many["properties"]["tasks"]["items"]) == returned
    assert "204" in responses
    assert {p["name"] for p in schema["paths"][path]["post"]["parameters"]} == {"namespace", "task_queue"}


def test_every_operation_is_bearer_authenticated_and_documents_errors(schema: dict[str, Any]) -> None:
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "a namespace API key",
    }
    error = schema["components"]["schemas"]["Error"]
    assert {"code", "message"} <= set(error["required"])
    operations = [op for ops in schema["paths"].values() for op in ops.values()]
    assert len(operations) >= 20
    for operation in operations:
        assert {"bearerAuth": []} in operation["security"], operation["operationId"]
        for status in ("400", "401", "404"):
            content = operation["responses"][status]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/Error"}, operation["operationId"]
        assert any(code.startswith("2") and code in operation["responses"] for code in ("200", "201", "204"))
