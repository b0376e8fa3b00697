"""The worker API's endpoints DRF cannot see, added to the OpenAPI schema.

Two postprocessing hooks (settings name them by dotted path): the lane's token calls,
described from the lane's own structs (:mod:`chronicle.lane_schema`) under the component
names and operation ids the DRF views had, their responses keeping their serializers in
:mod:`matching.schemas`; and the async long-polls, whose tasks are the ``WorkflowTask``
and ``ActivityTask`` components the worker endpoints already declare, so both halves of
the worker API agree.
"""

from __future__ import annotations

from typing import Any

from chronicle import lane_schema as described
from chronicle.openapi import ERROR_STATUSES
from matching import schemas
from matching.lane import ENDPOINTS
from matching.lane_batch import ReportBatch, ReportBatchAnswer
from matching.lane_polls import POLL_ENDPOINTS, PollRequest

QUEUE_PATH = "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/"
_RESPONSES: dict[str, type[Any]] = {
    "WorkflowTaskCompleted": schemas.WorkflowTaskCompletedSerializer,
    "HeartbeatResponse": schemas.HeartbeatResponseSerializer,
    "ActivityTaskReported": schemas.ActivityTaskReportedSerializer,
}


def add_lane_to_schema(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Add the token calls' operations and the components they name."""
    described.add_components(result, described.request_components(e.body for e in ENDPOINTS))
    described.add_components(
        result, described.response_components(generator, QUEUE_PATH, _RESPONSES.values())
    )
    paths = result.setdefault("paths", {})
    _add_batch(result, paths)
    for endpoint in ENDPOINTS:
        tail = endpoint.path.replace("/", "_").replace("-", "_")
        paths.setdefault(QUEUE_PATH + endpoint.path, {})["post"] = described.operation(
            operation_id=f"v1_namespaces_task_queues_{tail}_create",
            summary=endpoint.summary,
            description="A token-based worker response: the key needs the worker role.",
            tag="worker",
            parameters=("namespace", "task_queue"),
            request=endpoint.body.__name__,
            responses={200: None if endpoint.response == "Empty" else endpoint.response},
        )
    return result


def add_async_endpoints_to_schema(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Add the async long-poll endpoints, which DRF cannot introspect, to the schema."""
    described.add_components(result, described.request_components([PollRequest]))
    components = result["components"]["schemas"]
    for needed in ("WorkflowTask", "ActivityTask", "Error"):
        if needed not in components:
            raise LookupError(f"the schema lacks the {needed!r} component the poll endpoints use")
    errors = {
        str(status): {"description": description, "content": described.json_ref("Error")}
        for status, description in ERROR_STATUSES.items()
        if status != 409
    }
    paths = result.setdefault("paths", {})
    for path, method, summary in POLL_ENDPOINTS:
        task = "WorkflowTask" if "/workflow-tasks/" in path else "ActivityTask"
        paths.setdefault(path, {})[method] = {
            "operationId": summary.lower().replace(" ", "_"),
            "summary": summary,
            "tags": ["worker"],
            "security": [{"bearerAuth": []}],
            "parameters": [described.path_parameter("namespace"), described.path_parameter("task_queue")],
            "requestBody": {"content": described.json_ref("PollRequest")},
            "responses": {
                "200": {
                    "description": "a task, or with max_tasks {tasks: [...]}",
                    "content": {"application/json": {"schema": _task_or_tasks(task)}},
                },
                "204": {"description": "no task before the poll deadline"},
                **errors,
            },
        }
    return result


def _task_or_tasks(task: str) -> dict[str, Any]:
    """A poll's answer: one task, or with ``max_tasks`` the tasks it took."""
    one = {"$ref": described.REF.format(name=task)}
    many = {"type": "object", "properties": {"tasks": {"type": "array", "items": one}}, "required": ["tasks"]}
    return {"oneOf": [one, many]}


def _add_batch(result: dict[str, Any], paths: dict[str, Any]) -> None:
    """The batch of token calls, from the structs that decode and answer it."""
    described.add_components(result, described.request_components([ReportBatch, ReportBatchAnswer]))
    paths.setdefault(QUEUE_PATH + "responses", {})["post"] = described.operation(
        operation_id="v1_namespaces_task_queues_responses_create",
        summary="Several token calls of one task queue, each answered as on its own",
        description="Each call (kind: the endpoint under the queue, body: its body) is checked, "
        "rate-limited and written as it would be alone, in its own transaction.",
        tag="worker",
        parameters=("namespace", "task_queue"),
        request="ReportBatch",
        responses={200: "ReportBatchAnswer"},
    )
