"""The security matrix's generator: every API operation, from the served OpenAPI schema,
checked against the URL resolver and the lean lane's route table.

An operation is a method and a path template of the schema; each is classified by the
role it needs (:func:`required_role`), from what the code and the schema say: the DRF
view's ``role``, the schema's tag for the lean lane and the provisioning views, and
"(operator key)" in the summary for platform-wide calls. A route served but absent from
the schema, a method a view handles but the schema omits, an operation no rule
classifies, or a path parameter without a sample value is reported by
:func:`inventory_faults`, so a new endpoint cannot slip past the matrix.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.forms.models import model_to_dict
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.exceptions import Resolver404

from chronicle.asgi import LANE_ROUTES
from namespaces.models import Membership, Namespace
from tests.asgi_client import asgi_request
from tests.integration.minted_ids import snapshot

METHODS = ("get", "post", "put", "patch", "delete")
# The lean lane's calls and the async long-polls have no view class with a ``role``: the
# schema's tag says which role they need.
ROLE_BY_TAG = {"client": "client", "worker": "worker"}
# A DRF view whose role depends on the key (documented): a worker may read payloads too.
ALSO_ALLOWED = {("GET", "/api/v1/namespaces/{namespace}/payloads/{digest}"): {"worker"}}
NOT_API = ("api/schema/",)  # the schema itself and its viewers: public, not operations
# Path parameters a caller names (not minted by the server): the same value in every
# namespace. A new path parameter needs a sample here or among the minted ids of the test.
NAMED = {"task_queue": "q", "activity_id": "act-1", "name": "CustomKeywordField", "update_id": "upd-1"}


@dataclass(frozen=True)
class Operation:
    method: str  # upper case
    template: str  # the schema's path, e.g. /api/v1/namespaces/{namespace}/workflows
    tag: str
    summary: str
    body_schema: dict[str, Any] | None
    parameters: tuple[str, ...] = field(default=())  # the path's parameter names
    query: tuple[str, ...] = field(default=())  # the query parameters' names

    @property
    def name(self) -> str:
        return f"{self.method} {self.template}"

    @property
    def scoped(self) -> bool:
        """Whether the operation acts inside one namespace named in its path."""
        return "namespace" in self.parameters

    def url(self, values: dict[str, str]) -> str:
        return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], self.template)

    def on_lane(self) -> bool:
        sample = self.url({name: "p" for name in self.parameters})
        return any(route.match(self.method, sample) for route in LANE_ROUTES)


def served_schema() -> dict[str, Any]:
    """The OpenAPI schema as the frontend serves it."""
    answer = asgi_request("GET", "/api/schema/", query="format=json")
    assert answer.status_code == 200, answer.content[:300]
    schema: dict[str, Any] = answer.json()
    return schema


def operations(schema: dict[str, Any]) -> list[Operation]:
    found = []
    for template, item in schema["paths"].items():
        for method in METHODS:
            described = item.get(method)
            if described is None:
                continue
            body = described.get("requestBody", {}).get("content", {}).get("application/json", {})
            found.append(
                Operation(
                    method=method.upper(),
                    template=template,
                    tag=(described.get("tags") or [""])[0],
                    summary=described.get("summary", ""),
                    body_schema=body.get("schema"),
                    parameters=tuple(re.findall(r"\{(\w+)\}", template)),
                    query=tuple(p["name"] for p in described.get("parameters", []) if p.get("in") == "query"),
                )
            )
    return found


def required_role(op: Operation) -> str | None:
    """The role the operation needs: ``operator`` (a superuser's operator key only), or a
    namespace key's ``client``, ``worker`` or ``admin``; None when no rule classifies it."""
    if "(operator key)" in op.summary:
        return "operator"
    if op.tag == "provisioning":
        return "admin"  # the namespace's admin key (or an operator key)
    role = None if op.on_lane() else getattr(_view_class(op), "role", None)
    return role if isinstance(role, str) else ROLE_BY_TAG.get(op.tag)


def _view_class(op: Operation) -> Any:
    try:
        match = get_resolver().resolve(op.url({name: "p" for name in op.parameters}))
    except Resolver404:
        return None
    return getattr(match.func, "view_class", None) or getattr(match.func, "cls", None)


def rows(namespace: Namespace) -> dict[str, Any]:
    """Every row of ``namespace`` a call could change (``minted_ids.snapshot`` and more)."""
    namespace.refresh_from_db()
    return {
        **snapshot(namespace),
        "namespace": json.dumps(model_to_dict(namespace), sort_keys=True, default=str),
        "members": sorted(Membership.objects.filter(namespace=namespace).values_list("user_id", "role")),
    }


# ---------------------------------------------------------------- inventory


def resolver_routes() -> Iterator[tuple[str, URLPattern]]:
    """Every route of Django's URL resolver, as ``(route with its prefixes, pattern)``."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                yield route, pattern

    yield from walk(get_resolver().url_patterns, "")


def template(route: str) -> str:
    """A Django route as a schema-style template: ``<str:namespace>`` becomes ``{namespace}``."""
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def fill(path: str, values: dict[str, str]) -> str:
    """A template with its parameters replaced by ``values``."""
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


def parameters(path: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", path)


def django_api_routes() -> Iterator[tuple[str, Any]]:
    """Every API route of the URL resolver as a schema-style template, with its callback."""
    for route, pattern in resolver_routes():
        if route.startswith("api/") and not route.startswith(NOT_API):
            yield template(route), pattern.callback


def inventory_faults(schema: dict[str, Any], samples: dict[str, str]) -> list[str]:
    """What the schema misses or the matrix cannot classify, one line each (must be none)."""
    ops = operations(schema)
    faults = []
    for template, callback in django_api_routes():
        documented = schema["paths"].get(template)
        if documented is None:
            faults.append(f"{template}: served but not in the schema")
            continue
        view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        for method in METHODS if view is not None else ():
            if hasattr(view, method) and method not in documented:
                faults.append(f"{method.upper()} {template}: handled but not in the schema")
    for route in LANE_ROUTES:
        if not any(route.match(op.method, op.url({n: "p" for n in op.parameters})) for op in ops):
            faults.append(f"lane route {route.pattern.pattern}: no operation of the schema reaches it")
    for op in ops:
        if required_role(op) is None:
            faults.append(f"{op.name}: no rule says which role it needs")
        faults += [f"{op.name}: no sample value for {{{p}}}" for p in op.parameters if p not in samples]
    return faults


# ---------------------------------------------------------------- bodies


# Bodies whose shape a schema cannot say well enough to pass validation: the batch of
# worker calls names each call's endpoint in free text.
EXAMPLES = {"ReportBatch": {"responses": [{"kind": "activity-tasks/heartbeat", "body": {"task_token": "t"}}]}}


def example_body(schema: dict[str, Any], body: dict[str, Any] | None) -> dict[str, Any]:
    """A body with every required field of ``body`` (a schema or a $ref) given a plausible value."""
    if body is None:
        return {}
    if body.get("$ref", "").rsplit("/", 1)[-1] in EXAMPLES:
        return dict(EXAMPLES[body["$ref"].rsplit("/", 1)[-1]])
    value = _example(schema, body, depth=0)
    return value if isinstance(value, dict) else {}


def statuses(answer: Any) -> set[int]:
    """The statuses an answer carries: its own, or for a batch of calls (``{responses:
    [{status, body}]}``, each answered as on its own) those of its calls."""
    if answer.status_code == 200:
        try:
            inner = answer.json().get("responses")
        except (ValueError, AttributeError):
            inner = None
        if isinstance(inner, list) and inner and all(isinstance(r, dict) and "status" in r for r in inner):
            return {int(r["status"]) for r in inner}
    return {answer.status_code}


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    for combined in ("allOf", "oneOf", "anyOf"):
        if combined in node:
            return resolve(schema, node[combined][0])
    return node


def _example(schema: dict[str, Any], node: dict[str, Any], depth: int) -> Any:
    node = resolve(schema, node)
    if "enum" in node:
        return next((v for v in node["enum"] if v not in ("", None)), node["enum"][0])
    kind = node.get("type", "object")
    if kind == "object":
        if depth > 4:
            return {}
        required = node.get("required", [])
        props = node.get("properties", {})
        return {name: _example(schema, props[name], depth + 1) for name in required if name in props}
    if kind == "array":
        return [_example(schema, node.get("items", {}), depth + 1) for _ in range(node.get("minItems", 0))]
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return max(node.get("minimum", 1), 1)
    text = {"date-time": "2026-01-01T00:00:00Z", "uuid": str(uuid.uuid4())}.get(node.get("format", ""), "x")
    return text if len(text) >= node.get("minLength", 0) else "x" * node["minLength"]
