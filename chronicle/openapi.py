"""OpenAPI declarations shared by every API: the error body, Bearer auth, one decorator.

Views are plain ``APIView`` subclasses validated by hand, so drf-spectacular cannot
guess their bodies; ``endpoint`` states them, with the ``{code, message, details}``
error body for every 4xx a caller can meet. The request it states is also the whole of
what the view takes: a body field the serializer lacks is refused
(:func:`chronicle.api.refuse_unknown_fields`), and the schema says so
(:func:`close_request_bodies`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request

from chronicle.api import refuse_unknown_fields

ERROR_STATUSES: dict[int, str] = {
    400: "invalid or malformed request",
    401: "missing, unknown or revoked API key",
    403: "the API key lacks the role",
    404: "namespace, execution or task not found",
    409: "conflicts with the execution's state",
    413: "payload too large",
    429: "rate limited (see Retry-After)",
    503: "the database is unavailable (see Retry-After)",
}


class ErrorSerializer(serializers.Serializer[Any]):
    """The body of every error response."""

    code = serializers.CharField(help_text="stable machine-readable code, e.g. invalid_argument")
    message = serializers.CharField(help_text="what went wrong, for a human")
    details = serializers.DictField(required=False, help_text="extra context, e.g. field errors")


class EmptySerializer(serializers.Serializer[Any]):
    """An empty JSON object: the call succeeded and has nothing to report."""


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Describe ``namespaces.auth.ApiKeyAuthentication`` as HTTP Bearer."""

    target_class = "namespaces.auth.ApiKeyAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "a namespace API key"}


def error_responses(statuses: Sequence[int] = tuple(ERROR_STATUSES)) -> dict[int, OpenApiResponse]:
    return {
        status: OpenApiResponse(ErrorSerializer, description=ERROR_STATUSES[status]) for status in statuses
    }


def endpoint(
    *,
    summary: str,
    tag: str,
    request: Any = None,
    response: Any = EmptySerializer,
    success: Sequence[int] = (200,),
    parameters: list[Any] | None = None,
    operation_id: str | None = None,
) -> Callable[[Any], Any]:
    """Declare one operation's request, success bodies and error bodies.

    ``response`` is one body for every status in ``success``, or a {status: body} map.
    """
    responses: dict[int, Any] = (
        dict(response) if isinstance(response, dict) else {status: response for status in success}
    )
    responses.update(error_responses())
    described = extend_schema(
        summary=summary,
        tags=[tag],
        request=request,
        responses=responses,
        parameters=parameters,
        operation_id=operation_id,
    )
    if not (isinstance(request, type) and issubclass(request, serializers.BaseSerializer)):
        return described
    serializer: serializers.BaseSerializer[Any] = request()

    def declare(handler: Callable[..., Any]) -> Any:
        @functools.wraps(handler)
        def checked(view: Any, request: Request, *args: Any, **kwargs: Any) -> Any:
            refuse_unknown_fields(serializer, request.data)
            return handler(view, request, *args, **kwargs)

        return described(checked)

    return declare


def close_request_bodies(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Mark every object a request body holds ``additionalProperties: false`` (a
    postprocessing hook, after the lean lane's): the API refuses the fields it does not list."""
    schemas = result.get("components", {}).get("schemas", {})
    seen: set[str] = set()
    pending = [
        body.get("schema", {})
        for path in result.get("paths", {}).values()
        for op in path.values()
        if isinstance(op, dict)
        for body in op.get("requestBody", {}).get("content", {}).values()
    ]
    while pending:
        node = pending.pop()
        for name in _refs(node):
            if name not in seen:
                seen.add(name)
                pending.append(schemas.get(name, {}))
        for obj in _objects(node):
            if "properties" in obj:
                obj.setdefault("additionalProperties", False)
    return result


def empty_query_values(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Mark every optional query parameter but a list ``allowEmptyValue`` (a postprocessing
    hook, after the lean lane's): the API reads ``name=`` as ``name`` left out. That is DRF's
    rule for a serializer reading a query string (``Field.get_value``), the lean lane's
    query reads keep it (``executions.lane_bodies.history_params``), and it is Temporal's
    for an empty ``run_id`` (the latest run). A list's empty value is one empty item, which
    its items' own rule judges, so a list is left as it is."""
    for path in result.get("paths", {}).values():
        for op in path.values():
            if not isinstance(op, dict):
                continue
            for parameter in op.get("parameters", []):
                if (
                    parameter.get("in") == "query"
                    and not parameter.get("required")
                    and parameter.get("schema", {}).get("type") != "array"
                ):
                    parameter["allowEmptyValue"] = True
    return result


def _refs(node: Any) -> Iterator[str]:
    """The component names ``node`` refers to."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            yield ref.rsplit("/", 1)[1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema object inside ``node`` (itself included)."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for item in node:
            yield from _objects(item)
