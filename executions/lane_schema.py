"""The client's lane calls in the OpenAPI schema (a postprocessing hook settings name).

DRF no longer serves start, signal-with-start, signal and the history read, so this hook
adds them under the operation ids and component names the DRF views had: request bodies
and the history's query parameters from the lane's structs (:mod:`executions.lane_bodies`),
responses from their serializers (:mod:`executions.schemas`).
"""

from __future__ import annotations

from typing import Any

from chronicle import lane_schema as described
from executions import lane_bodies as bodies
from executions import lane_updates as updates
from executions import schemas

NS = "/api/v1/namespaces/{namespace}/"
RUN = NS + "workflows/{workflow_id}"
RUNS = RUN + "/runs/{run_id}"


def add_lane_to_schema(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Add the client's lane operations and the components they name."""
    described.add_components(
        result,
        described.request_components(
            [bodies.StartWorkflowRequest, bodies.SignalWithStartRequest, bodies.SignalRequest]
        ),
    )
    described.add_components(
        result,
        described.response_components(
            generator,
            NS + "workflows",
            [
                schemas.StartResponseSerializer,
                schemas.SignalWithStartResponseSerializer,
                schemas.HistoryPageSerializer,
            ],
        ),
    )
    paths = result.setdefault("paths", {})
    paths.setdefault(NS + "workflows", {})["post"] = described.operation(
        operation_id="start_workflow_execution",
        summary="Start a workflow execution",
        description="POST starts a workflow; GET lists runs newest first.",
        tag="client",
        parameters=("namespace",),
        request="StartWorkflowRequest",
        responses={200: "StartResponse", 201: "StartResponse"},
    )
    paths.setdefault(NS + "signal-with-start", {})["post"] = described.operation(
        operation_id="v1_namespaces_signal_with_start_create",
        summary="Signal a workflow, starting it first if it is not running",
        tag="client",
        parameters=("namespace",),
        request="SignalWithStartRequest",
        responses={200: "SignalWithStartResponse"},
    )
    query = described.query_parameters(bodies.HistoryParams)
    for path, names, infix in (
        (RUN, ("namespace", "workflow_id"), ""),
        (RUNS, ("namespace", "run_id", "workflow_id"), "runs_"),
    ):
        paths.setdefault(path + "/signal", {})["post"] = described.operation(
            operation_id=f"v1_namespaces_workflows_{infix}signal_create",
            summary="Send a signal to a running workflow",
            tag="client",
            parameters=names,
            request="SignalRequest",
            responses={200: None},
        )
        paths.setdefault(path + "/history", {})["get"] = described.operation(
            operation_id=f"v1_namespaces_workflows_{infix}history_retrieve",
            summary="Page through a run's history, optionally long-polling for new events",
            tag="client",
            parameters=names,
            query=query,
            responses={200: "HistoryPage"},
        )
        _add_update_operations(paths, path, names, infix)
    _add_update_with_start(result, paths)
    return result


def _add_update_operations(paths: dict[str, Any], path: str, names: tuple[str, ...], infix: str) -> None:
    """Send an update and wait for a stage; poll for its outcome (``executions.lane_updates``)."""
    paths.setdefault(path + "/update", {})["post"] = described.operation(
        operation_id=f"v1_namespaces_workflows_{infix}update_create",
        summary="Send an update to a running workflow and wait for the stage asked for",
        description="Answers when the update reaches `wait_stage` or the wait ends; `stage` says "
        "which it reached. A repeated `update_id` gets the first update's stage and outcome.",
        tag="client",
        parameters=names,
        request="UpdateWorkflowRequest",
        responses={200: "UpdateOutcome"},
    )
    paths.setdefault(path + "/updates/{update_id}", {})["get"] = described.operation(
        operation_id=f"v1_namespaces_workflows_{infix}updates_retrieve",
        summary="Poll for an update's outcome, waiting for the stage asked for",
        tag="client",
        parameters=(*names, "update_id"),
        query=described.query_parameters(updates.UpdatePollParams),
        responses={200: "UpdateOutcome"},
    )


def _add_update_with_start(result: dict[str, Any], paths: dict[str, Any]) -> None:
    described.add_components(
        result,
        described.request_components(
            [
                updates.UpdateWorkflowRequest,
                updates.UpdateWithStartRequest,
                updates.UpdateOutcome,
                updates.UpdateWithStartOutcome,
            ]
        ),
    )
    paths.setdefault(NS + "update-with-start", {})["post"] = described.operation(
        operation_id="v1_namespaces_update_with_start_create",
        summary="Start a workflow (or use the running one) and send it an update, in one call",
        tag="client",
        parameters=("namespace",),
        request="UpdateWithStartRequest",
        responses={200: "UpdateWithStartOutcome"},
    )
