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
    return result
