"""The lane's endpoints in the OpenAPI schema: request bodies from the lane's own structs.

DRF no longer serves the token calls, so drf-spectacular cannot see them; this
postprocessing hook adds them, as the async polls are added. Each request body is the
JSON schema msgspec derives from the struct that decodes it (one description of each
request), under the component names the DRF serializers had. The response bodies keep
their serializers in :mod:`matching.schemas` (they only describe what the kernel builds)
and are resolved here the way drf-spectacular resolves a view's.
"""

from __future__ import annotations

from typing import Any

import msgspec
from drf_spectacular.openapi import AutoSchema
from rest_framework.views import APIView

from chronicle.openapi import ERROR_STATUSES
from matching import schemas
from matching.lane import ENDPOINTS

QUEUE_PATH = "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/"
_REF = "#/components/schemas/{name}"
_RESPONSES: dict[str, type[Any]] = {
    "WorkflowTaskCompleted": schemas.WorkflowTaskCompletedSerializer,
    "HeartbeatResponse": schemas.HeartbeatResponseSerializer,
    "ActivityTaskReported": schemas.ActivityTaskReportedSerializer,
}


def add_lane_to_schema(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Add the token calls' operations and the components they name."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in _request_components().items():
        components.setdefault(name, schema)
    for name, schema in _response_components(generator).items():
        components.setdefault(name, schema)
    paths = result.setdefault("paths", {})
    for endpoint in ENDPOINTS:
        paths.setdefault(QUEUE_PATH + endpoint.path, {})["post"] = _operation(endpoint)
    return result


def _request_components() -> dict[str, Any]:
    """The structs' JSON schemas, in OpenAPI 3.0's dialect (``nullable``, not a null type)."""
    _, found = msgspec.json.schema_components([e.body for e in ENDPOINTS], ref_template=_REF)
    return {name: _openapi_3_0(schema) for name, schema in found.items()}


def _openapi_3_0(node: Any) -> Any:
    """Rewrite ``anyOf: [X, {type: null}]`` as ``allOf: [X], nullable: true`` throughout."""
    if isinstance(node, list):
        return [_openapi_3_0(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _openapi_3_0(value) for key, value in node.items() if key != "title"}
    if node.get("required") == []:  # 3.0 wants a non-empty list or none
        del node["required"]
    options = node.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [option for option in options if option != {"type": "null"}]
        del node["anyOf"]
        node.update({"allOf": rest} if len(rest) == 1 and "$ref" in rest[0] else {"anyOf": rest})
        node["nullable"] = True
    return node


def _response_components(generator: Any) -> dict[str, Any]:
    """The response serializers' components (and those they nest), as drf-spectacular
    builds a view's."""
    auto = AutoSchema()
    auto.registry = generator.registry
    auto.method = "POST"
    auto.path = QUEUE_PATH
    view = APIView()  # a serializer's context is built from a view's request; there is none
    view.request = None  # type: ignore[assignment]  # no request: none is needed
    auto.view = view
    for serializer in _RESPONSES.values():
        auto.resolve_serializer(serializer, "response")
    built: dict[str, Any] = generator.registry.build({}).get("schemas", {})
    return built


def _operation(endpoint: Any) -> dict[str, Any]:
    success: dict[str, Any] = {"description": "No response body"}
    if endpoint.response != "Empty":
        success = {"description": "", "content": _json_ref(endpoint.response)}
    tail = endpoint.path.replace("/", "_").replace("-", "_")
    return {
        "operationId": f"v1_namespaces_task_queues_{tail}_create",
        "summary": endpoint.summary,
        "description": "A token-based worker response: the key needs the worker role.",
        "tags": ["worker"],
        "security": [{"bearerAuth": []}],
        "parameters": [_path_parameter("namespace"), _path_parameter("task_queue")],
        "requestBody": {"content": _json_ref(endpoint.body.__name__), "required": True},
        "responses": {
            "200": success,
            **{
                str(status): {"description": description, "content": _json_ref("Error")}
                for status, description in ERROR_STATUSES.items()
            },
        },
    }


def _ref(component: str) -> dict[str, str]:
    return {"$ref": _REF.format(name=component)}


def _json_ref(component: str) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(component)}}


def _path_parameter(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
