"""The lean lane: the worker's token calls, without DRF, in front of Django.

Completing, failing, heartbeating and cancelling tasks and answering queries are most
of a workflow's calls. Through DRF each paid for its request wrapper, content
negotiation, serializer validation and renderer, and through Django for URL resolution
and request and response objects it did not use. Here a call is: the key from the
per-process cache, the tenancy gate, the body decoded and validated once by its struct
(:mod:`matching.lane_bodies`), the kernel call with the URL's namespace and queue as the
token's scope, and the answer encoded once. :mod:`matching.lane_asgi` serves it.

Everything a caller can observe is what the DRF views did: the URLs, the checks and
their order (key, method, path, namespace and role, rate, body), the status codes, the
``{code, message, details}`` errors with Retry-After, and the JSON. The OpenAPI schema
describes these endpoints from the same structs (:mod:`matching.lane_schema`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from chronicle.api import refuse_nul
from chronicle.errors import ChronicleError, ErrorCode
from history import kernel
from history.kernel.tokens import TaskScope
from matching import lane_bodies as bodies
from namespaces.auth import access_namespace, api_key_from_header

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


def _activity_report(handed_back: Any) -> bytes:
    """``{}``, or the workflow task handed back to the reporting worker."""
    return encode({"workflow_task": handed_back.as_dict()}) if handed_back is not None else EMPTY


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
        _activity_report,
        "ActivityTaskReported",
    ),
    Endpoint(
        "activity-tasks/fail",
        "Fail an activity task (it may be retried)",
        bodies.ActivityTaskFailedRequest,
        kernel.respond_activity_task_failed,
        _activity_report,
        "ActivityTaskReported",
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


@dataclass(frozen=True)
class Call:
    """One request to the lane, as the ASGI handler read it."""

    endpoint: Endpoint
    method: str
    authorization: str | None
    namespace: str
    task_queue: str
    body: bytes


@dataclass(frozen=True)
class Reply:
    """A whole answer: status, JSON body and any extra headers."""

    status: int
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()


def answer(call: Call) -> Reply:
    """Answer one token call; every refusal is the ``{code, message, details}`` error."""
    try:
        return Reply(200, _respond(call))
    except ChronicleError as error:
        return error_reply(error)


def _respond(call: Call) -> bytes:
    """The DRF views' order: the key (401), the method (405), the path (400), namespace and
    role (404/403), the rate (429), the body (413/400), then the kernel."""
    key = api_key_from_header(call.authorization)
    if call.method != "POST":
        raise MethodNotAllowed(call.method)
    refuse_nul(call.namespace, "the path")
    refuse_nul(call.task_queue, "the path")
    ns = access_namespace(key, call.namespace, "worker")
    endpoint = call.endpoint
    body = bodies.decode_body(call.body, endpoint.body)
    return endpoint.answer(endpoint.action(scope=TaskScope(ns.id, call.task_queue), **body.kernel_args()))


class MethodNotAllowed(ChronicleError):
    """A verb other than POST: 405 with DRF's code and message."""

    def __init__(self, method: str) -> None:
        super().__init__(ErrorCode.INVALID_ARGUMENT, f'Method "{method}" not allowed.')

    @property
    def status(self) -> int:
        return 405

    def as_dict(self) -> dict[str, Any]:
        return {"code": "method_not_allowed", "message": self.message}


def error_reply(error: ChronicleError) -> Reply:
    """The error body and status, with Retry-After when the caller should wait."""
    if error.retry_after is None:
        return Reply(error.status, encode(error.as_dict()))
    wait = str(max(1, int(error.retry_after + 0.999))).encode()
    return Reply(error.status, encode(error.as_dict()), ((b"retry-after", wait),))


_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """JSON as DRF's renderer wrote it (compact, UTF-8)."""
    try:
        return _encoder.encode(value)
    except (TypeError, OverflowError):  # an integer msgspec cannot hold: the stdlib can
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
