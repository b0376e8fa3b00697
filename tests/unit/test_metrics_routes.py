"""Requests are labelled by route, never by the ids in their path (a label per workflow would
grow without bound), and a poll's wait is told from a plain request by its route."""

from __future__ import annotations

from typing import Any

import pytest

from chronicle import metrics
from executions.lane import ROUTES as CLIENT_ROUTES
from matching.lane import ROUTE as WORKER_ROUTE


def lane_label(method: str, path: str) -> str:
    for route in [WORKER_ROUTE, *CLIENT_ROUTES]:
        match = route.match(method, path)
        if match is not None:
            return metrics.lane_route(match)
    raise AssertionError(f"no lane route for {method} {path}")


@pytest.mark.parametrize(
    ("method", "path", "label"),
    [
        ("POST", "/api/v1/namespaces/acme/workflows", "/api/v1/namespaces/{namespace}/workflows"),
        (
            "POST",
            "/api/v1/namespaces/acme/workflows/order-1/signal",
            "/api/v1/namespaces/{namespace}/workflows/{workflow_id}/signal",
        ),
        (
            "GET",
            "/api/v1/namespaces/acme/workflows/order-1/runs/5f0c/history",
            "/api/v1/namespaces/{namespace}/workflows/{workflow_id}/runs/{run_id}/history",
        ),
        (
            "POST",
            "/api/v1/namespaces/acme/task-queues/orders/workflow-tasks/complete",
            "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/workflow-tasks/complete",
        ),
    ],
)
def test_a_lane_call_is_labelled_by_its_route_with_ids_as_names(method: str, path: str, label: str) -> None:
    assert lane_label(method, path) == label


def test_a_django_path_is_labelled_by_its_url_pattern_in_the_same_style() -> None:
    describe = "/api/v1/namespaces/acme/workflows/order-1"
    assert metrics.django_route(describe) == "/api/v1/namespaces/{namespace}/workflows/{workflow_id}"
    assert metrics.django_route("/no/such/page") == "unmatched"
    assert metrics.django_route("/static/admin/css/base.css") == "/static/"


def value(name: str, labels: dict[str, str]) -> float:
    from prometheus_client import REGISTRY

    found = REGISTRY.get_sample_value(name, labels)
    return found or 0.0


def test_a_poll_is_counted_as_a_request_and_as_a_wait_by_outcome() -> None:
    route = "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/workflow-tasks/poll"
    scope: dict[str, Any] = {"method": "POST", "query_string": b""}
    request = {"route": route, "method": "POST", "status": "204"}
    empty = {"kind": "workflow", "outcome": "empty"}
    before = (
        value("chronicle_request_duration_seconds_count", request),
        value("chronicle_poll_wait_seconds_count", empty),
    )
    metrics.observe_request(scope, route, 204, 1.5)
    after = (
        value("chronicle_request_duration_seconds_count", request),
        value("chronicle_poll_wait_seconds_count", empty),
    )
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


def test_a_history_read_is_a_wait_only_when_it_asks_to_wait() -> None:
    route = "/api/v1/namespaces/{namespace}/workflows/{workflow_id}/history"
    task = {"kind": "history", "outcome": "task"}
    before = value("chronicle_poll_wait_seconds_count", task)
    metrics.observe_request({"method": "GET", "query_string": b"page_size=100"}, route, 200, 0.01)
    assert value("chronicle_poll_wait_seconds_count", task) == before
    metrics.observe_request({"method": "GET", "query_string": b"wait_new_event=true"}, route, 200, 0.01)
    assert value("chronicle_poll_wait_seconds_count", task) == before + 1
