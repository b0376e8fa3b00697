"""Which API requests the frontend serves on its shared thread pool, and which get their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import Resolver404, get_resolver

from chronicle.asgi import LANE_ROUTES, _takes_djangos_path

API = "/api/v1/namespaces/shop"
RUN = API + "/workflows/order-1/runs/8c1d52a4-2b3e-4a55-9a0b-3c3f1e7f0c11"


def test_a_waiting_view_gets_a_thread_of_its_own() -> None:
    assert _takes_djangos_path(API + "/workflows/order-1/query")  # waits for the worker's answer


@pytest.mark.parametrize(
    "path",
    [
        API + "/workflows",  # the list
        API + "/task-queues/orders/build-ids",
        API + "/no-such-endpoint",  # answered 404 from the pool
    ],
)
def test_views_that_answer_at_once_share_the_pool(path: str) -> None:
    assert not _takes_djangos_path(path)


@pytest.mark.parametrize(
    "tail",
    [
        "workflow-tasks/complete",
        "workflow-tasks/fail",
        "activity-tasks/complete",
        "activity-tasks/fail",
        "activity-tasks/canceled",
        "activity-tasks/heartbeat",
        "query-tasks/respond",
        "workflow-tasks/poll",  # the long-polls wait on the event loop, not on a thread
        "activity-tasks/poll",
    ],
)
def test_worker_calls_take_the_lean_lane_and_django_serves_no_twin(tail: str) -> None:
    path = API + "/task-queues/orders/" + tail
    match = lane_call("POST", path)
    assert match is not None and match["namespace"] == "shop" and match["task_queue"] == "orders"
    with pytest.raises(Resolver404):
        get_resolver().resolve(path)
    assert lane_call("POST", path + "/x") is None
    assert lane_call("POST", API + "/task-queues/a/b/" + tail) is None


@pytest.mark.parametrize(
    ("method", "path", "params"),
    [
        ("POST", API + "/workflows", {"namespace": "shop"}),
        ("POST", API + "/signal-with-start", {"namespace": "shop"}),
        ("GET", API + "/signal-with-start", {"namespace": "shop"}),  # refused by the lane: 405
        ("POST", API + "/workflows/order-1/signal", {"workflow_id": "order-1"}),
        ("POST", RUN + "/signal", {"run_id": RUN.rsplit("/", 1)[1]}),
        ("GET", API + "/workflows/order-1/history", {"workflow_id": "order-1"}),
        ("GET", RUN + "/history", {"workflow_id": "order-1"}),
    ],
)
def test_the_clients_hot_calls_take_the_lean_lane_and_django_serves_no_twin(
    method: str, path: str, params: dict[str, str]
) -> None:
    match = lane_call(method, path)
    assert match is not None and params.items() <= match.groupdict().items()
    if path != API + "/workflows":
        with pytest.raises(Resolver404):
            get_resolver().resolve(path)
    assert lane_call(method, path + "/x") is None


def test_the_workflow_list_stays_a_django_view() -> None:
    assert lane_call("GET", API + "/workflows") is None
    get_resolver().resolve(API + "/workflows")


def lane_call(method: str, path: str) -> re.Match[str] | None:
    """The lane's match for a request, or None when Django serves it."""
    for route in LANE_ROUTES:
        match = route.match(method, path)
        if match is not None:
            return match
    return None


def test_the_asgi_module_loads_as_gunicorn_loads_it_with_no_settings_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    loaded = subprocess.run(
        [sys.executable, "-c", "import chronicle.asgi"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
