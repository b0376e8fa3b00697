"""Describing the lean lane's endpoints in the OpenAPI schema, from the lane's own structs.

DRF does not serve the lane's calls, so drf-spectacular cannot see them; each app's
postprocessing hook (``matching.lane_schema``, ``executions.lane_schema``) adds its
operations with these helpers. A request body is the JSON schema msgspec derives from the
struct that decodes it (one description of each request), under the component name the
DRF serializer had; query parameters likewise. Response bodies keep their serializers
(they only describe what the kernel builds) and are resolved as drf-spectacular resolves
a view's. Imports no app.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from drf_spectacular.openapi import AutoSchema
from rest_framework.views import APIView

from chronicle.openapi import ERROR_STATUSES

REF = "#/components/schemas/{name}"


def add_components(result: dict[str, Any], components: dict[str, Any]) -> None:
    """Add ``components`` the schema lacks."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in components.items():
        schemas.setdefault(name, schema)


def request_components(structs: Iterable[type[msgspec.Struct]]) -> dict[str, Any]:
    """The structs' JSON schemas (and those they nest), in OpenAPI 3.0's dialect."""
    _, found = msgspec.json.schema_components(list(structs), ref_template=REF)
    return {name: openapi_3_0(schema) for name, schema in found.items()}


def query_parameters(struct: type[msgspec.Struct]) -> list[dict[str, Any]]:
    """A struct's fields as query parameters."""
    schema = request_components([struct])[struct.__name__]
    parameters = []
    for name, field in schema["properties"].items():
        parameter: dict[str, Any] = {"in": "query", "name": name, "schema": field}
        description = field.pop("description", None)
        if description:
            parameter["description"] = description
        parameters.append(parameter)
    return parameters


def openapi_3_0(node: Any) -> Any:
    """Rewrite ``anyOf: [X, {type: null}]`` as ``allOf: [X], nullable: true`` throughout."""
    if isinstance(node, list):
        return [openapi_3_0(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: openapi_3_0(value) for key, value in node.items() if key != "title"}
    if node.get("required") == []:  # 3.0 wants a non-empty list or none
        del node["required"]
    options = node.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [option for option in options if option != {"type": "null"}]
        del node["anyOf"]
        if len(rest) == 1 and "$ref" not in rest[0]:
            node.update(rest[0])
        else:
            node.update({"allOf": rest} if len(rest) == 1 else {"anyOf": rest})
        node["nullable"] = True
    return node


def response_components(generator: Any, path: str, serializers: Iterable[type[Any]]) -> dict[str, Any]:
    """The response serializers' components (and those they nest), as drf-spectacular
    builds a view's."""
    auto = AutoSchema()
    auto.registry = generator.registry
    auto.method = "POST"
    auto.path = path
    view = APIView()  # a serializer's context is built from a view's request; there is none
    view.request = None  # type: ignore[assignment]  # no request: none is needed
    auto.view = view
    for serializer in serializers:
        auto.resolve_serializer(serializer, "response")
    built: dict[str, Any] = generator.registry.build({}).get("schemas", {})
    return built


def operation(
    *,
    operation_id: str,
    summary: str,
    tag: str,
    parameters: Iterable[str],
    responses: dict[int, str | None],
    request: str | None = None,
    query: list[dict[str, Any]] | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """One operation: path parameters by name, ``responses`` as {status: component or
    None for no body}, every error status with the ``Error`` body."""
    success = {
        str(status): {"description": "", "content": json_ref(component)}
        if component
        else {"description": "No response body"}
        for status, component in responses.items()
    }
    described: dict[str, Any] = {"operationId": operation_id, "summary": summary}
    if description:
        described["description"] = description
    described.update(
        {
            "tags": [tag],
            "security": [{"bearerAuth": []}],
            "parameters": [path_parameter(name) for name in parameters] + (query or []),
        }
    )
    if request:
        described["requestBody"] = {"content": json_ref(request), "required": True}
    described["responses"] = {
        **success,
        **{
            str(status): {"description": text, "content": json_ref("Error")}
            for status, text in ERROR_STATUSES.items()
        },
    }
    return described


def json_ref(component: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": REF.format(name=component)}}}


def path_parameter(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
