"""The lean lane: the worker's token calls, without DRF, in front of Django.

Completing, failing, heartbeating and cancelling tasks and answering queries are most
of a workflow's calls. Through DRF each paid for its request wrapper, content
negotiation, serializer validation and renderer, and through Django for URL resolution
and request and response objects it did not use. Here a call is: the key from the
per-process cache, the tenancy gate, the body decoded and validated once by its struct
(:mod:`matching.lane_bodies`), the kernel call with the URL's namespace and queue as the
token's scope, and the answer encoded once. :data:`ROUTE` is its place in the ASGI
handler (:mod:`chronicle.lane_asgi`), which serves it in one trip to the API's pool.

Everything a caller can observe is what the DRF views did: the URLs, the checks and
their order (key, method, path, namespace and role, rate, body), the status codes, the
``{code, message, details}`` errors with Retry-After, and the JSON. The OpenAPI schema
describes these endpoints from the same structs (:mod:`matching.lane_schema`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from chronicle.lane import EMPTY, Call, Reply, decode_body, encode, require_method
from chronicle.lane_asgi import Handler, Route, one_trip
from history import kernel
from history.kernel.tokens import TaskScope
from matching import lane_bodies as bodies
from matching import lane_polls
from namespaces.auth import access_namespace, api_key_from_header


@dataclass(frozen=True)
class Endpoint:
    """One token call: its URL tail, body, kernel action and how its result is answered."""

    path: str
    summary: str
    body: type[bodies.Body]
    action: Callable[..., Any]
    answer: Callable[[Any], bytes]
    response: str = "Empty"


def _completion_fields(result: Any) -> dict[str, Any]:
    """The next task if asked for, the eager activities, the close if the run closed, and
    the events written if asked for."""
    task = result.new_workflow_task
    answer = {"workflow_task": task.as_dict() if task else None, "activity_tasks": result.activity_tasks}
    if result.closed is not None:
        answer["closed"] = result.closed
    if result.recorded_events is not None:
        answer["recorded_events"] = result.recorded_events
    return answer


def _completion(result: Any) -> bytes:
    return encode(_completion_fields(result))


def _activity_report(handed_back: Any) -> bytes:
    """``{}``, or the workflow task handed back to the reporting worker."""
    return encode({"workflow_task": handed_back.as_dict()}) if handed_back is not None else EMPTY


def _activity_completed(reported: Any) -> bytes:
    """The run-ahead task's completion when it was recorded, else as any activity report."""
    if reported.ahead is not None:
        return encode({"workflow_task_ahead": _completion_fields(reported.ahead)})
    return _activity_report(reported.handed_back)


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
        kernel.report_activity_task_completed,
        _activity_completed,
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
    Endpoint(
        "reset-sticky-task-queue",
        "Send a run's next workflow task to the normal queue (the worker dropped it from its cache)",
        bodies.ResetStickyTaskQueueRequest,
        kernel.reset_sticky_task_queue,
        _empty,
    ),
]


def answer(endpoint: Endpoint, call: Call) -> Reply:
    """The DRF views' order: the key (401), the method (405), the path (400), namespace and
    role (404/403), the rate (429), the body (413/400), then the kernel."""
    key = api_key_from_header(call.authorization)
    require_method(call, "POST")
    call.refuse_nul_in_path()
    return Reply(200, respond(endpoint, key, call.params["namespace"], call.params["task_queue"], call.body))


def respond(endpoint: Endpoint, key: object, namespace: str, task_queue: str, raw: bytes) -> bytes:
    """One token call after the key and the path were checked: the tenancy gate and the
    rate, the body, the kernel (with the URL's namespace and queue as the token's scope),
    the answer. A call on its own and each call of a batch take this same path."""
    return endpoint.answer(endpoint.action(**kernel_call(endpoint, key, namespace, task_queue, raw)))


def kernel_call(
    endpoint: Endpoint, key: object, namespace: str, task_queue: str, raw: bytes
) -> dict[str, Any]:
    """The tenancy gate and the rate, then the body: the kernel action's arguments, with
    the URL's namespace and queue as the token's scope."""
    ns = access_namespace(key, namespace, "worker")
    body = decode_body(raw, endpoint.body)
    return {"scope": TaskScope(ns.id, task_queue), **body.kernel_args()}


_HANDLERS: dict[str, Handler] = {
    **{endpoint.path: one_trip(partial(answer, endpoint)) for endpoint in ENDPOINTS},
    **lane_polls.HANDLERS,
}
# The token calls and the polls (:mod:`matching.lane_polls`), each under its queue.
ROUTE = Route(
    # The URLs Django's resolver matched for these views: ``<str:...>`` is one path segment.
    re.compile(
        r"/api/v1/namespaces/(?P<namespace>[^/]+)/task-queues/(?P<task_queue>[^/]+)/"
        r"(?P<endpoint>" + "|".join(re.escape(path) for path in _HANDLERS) + r")\Z"
    ),
    lambda match: _HANDLERS[match["endpoint"]],
)
