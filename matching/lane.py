"""The lean lane: the worker's token calls as plain Django views, without DRF.

Completing, failing, heartbeating and cancelling tasks and answering queries are most
of a workflow's calls. Through DRF each paid for its request wrapper, content
negotiation, serializer validation and renderer; here each is one function served by
:class:`chronicle.asgi.ApiHandler`'s pool path (no middleware): the key from the
per-process cache, the tenancy gate, the body decoded and validated once by its struct
(:mod:`matching.lane_bodies`), the kernel call, and the answer encoded once.

Everything a caller can observe is what the DRF views did: the URLs, the checks and
their order (key, path, namespace and role, rate, body), the status codes, the
``{code, message, details}`` errors with Retry-After, and the JSON. The OpenAPI schema
describes these endpoints from the same structs (:func:`add_lane_to_schema`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from chronicle.api import refuse_nul
from chronicle.errors import ChronicleError, ErrorCode
from history import kernel
from history.kernel.tokens import TaskScope
from matching import lane_bodies as bodies
from namespaces.auth import access_namespace, api_key_from_header

JSON = "application/json"
EMPTY = b"{}"


@dataclass(frozen=True)
class Endpoint:
    """One token call: its URL tail, body, kernel action and how its result is answered."""

    path: str
    summary: str
    body: type[bodies.Body]
    action: Callable[..., Any]
    answer: Callable[[Any], bytes]
    response: str = "Empty"


def _completion(result: Any) -> bytes:
    task = result.new_workflow_task
    return encode(
        {"workflow_task": task.as_dict() if task else None, "activity_tasks": result.activity_tasks}
    )


def _heartbeat(cancel_requested: Any) -> bytes:
    return b'{"cancel_requested":true}' if cancel_requested else b'{"cancel_requested":false}'


def _empty(_: Any) -> bytes:
    return EMPTY


ENDPOINTS = [
    Endpoint(
        "workflow-tasks/complete",
        "Complete a workflow task with commands",
        bodies.WorkflowTaskCompletedRequest,
        kernel.respond_workflow_task_completed,
        _completion,
        "WorkflowTaskCompleted",
    ),
    Endpoint(
        "workflow-tasks/fail",
        "Fail a workflow task",
        bodies.WorkflowTaskFailedRequest,
        kernel.respond_workflow_task_failed,
        _empty,
    ),
    Endpoint(
        "activity-tasks/complete",
        "Complete an activity task with its result",
        bodies.ActivityTaskCompletedRequest,
        kernel.respond_activity_task_completed,
        _empty,
    ),
    Endpoint(
        "activity-tasks/fail",
        "Fail an activity task (it may be retried)",
        bodies.ActivityTaskFailedRequest,
        kernel.respond_activity_task_failed,
        _empty,
    ),
    Endpoint(
        "activity-tasks/canceled",
        "Report an activity task as canceled",
        bodies.ActivityTaskCanceledRequest,
        kernel.respond_activity_task_canceled,
        _empty,
    ),
    Endpoint(
        "activity-tasks/heartbeat",
        "Heartbeat an activity task; learn whether it is canceled",
        bodies.ActivityTaskHeartbeatRequest,
        kernel.record_activity_task_heartbeat,
        _heartbeat,
        "HeartbeatResponse",
    ),
    Endpoint(
        "query-tasks/respond",
        "Answer a query task",
        bodies.QueryTaskAnswerRequest,
        kernel.respond_query_task_completed,
        _empty,
    ),
]


def serve(endpoint: Endpoint, request: HttpRequest, namespace: str, task_queue: str) -> HttpResponse:
    """Answer one token call; every refusal is the ``{code, message, details}`` error."""
    try:
        return HttpResponse(_respond(endpoint, request, namespace, task_queue), content_type=JSON)
    except ChronicleError as error:
        return error_response(error)
    except Http404:
        return error_response(ChronicleError(ErrorCode.NOT_FOUND, "not found"))


def _respond(endpoint: Endpoint, request: HttpRequest, namespace: str, task_queue: str) -> bytes:
    """The DRF views' order: the key (401), the method (405), the path (400), namespace and
    role (404/403), the rate (429), the body (413/400), then the kernel."""
    key = api_key_from_header(request.META.get("HTTP_AUTHORIZATION"))
    if request.method != "POST":
        raise MethodNotAllowed(str(request.method))
    refuse_nul(namespace, "the path")
    refuse_nul(task_queue, "the path")
    ns = access_namespace(key, namespace, "worker")
    body = bodies.decode_body(_raw_body(request), endpoint.body)
    return endpoint.answer(endpoint.action(scope=TaskScope(ns.id, task_queue), **body.kernel_args()))


def _raw_body(request: HttpRequest) -> bytes:
    """The body; one Django refuses for its declared size is the 413 any larger body gets."""
    try:
        return request.body
    except RequestDataTooBig:
        raise ChronicleError(ErrorCode.PAYLOAD_TOO_LARGE, "request body too large") from None


class MethodNotAllowed(ChronicleError):
    """A verb other than POST: 405 with DRF's code and message."""

    def __init__(self, method: str) -> None:
        super().__init__(ErrorCode.INVALID_ARGUMENT, f'Method "{method}" not allowed.')

    @property
    def status(self) -> int:
        return 405

    def as_dict(self) -> dict[str, Any]:
        return {"code": "method_not_allowed", "message": self.message}


def error_response(error: ChronicleError) -> HttpResponse:
    """The error body and status, with Retry-After when the caller should wait."""
    response = HttpResponse(encode(error.as_dict()), status=error.status, content_type=JSON)
    if error.retry_after is not None:
        response["Retry-After"] = str(max(1, int(error.retry_after + 0.999)))
    return response


_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """JSON as DRF's renderer wrote it (compact, UTF-8)."""
    try:
        return _encoder.encode(value)
    except (TypeError, OverflowError):  # an integer msgspec cannot hold: the stdlib can
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _view(endpoint: Endpoint) -> Callable[..., HttpResponse]:
    def view(request: HttpRequest, namespace: str, task_queue: str) -> HttpResponse:
        return serve(endpoint, request, namespace, task_queue)

    view.__name__ = view.__qualname__ = endpoint.body.__name__
    view.__doc__ = endpoint.summary
    return csrf_exempt(view)


VIEWS = {endpoint.path: _view(endpoint) for endpoint in ENDPOINTS}
