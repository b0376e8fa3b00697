"""Which API requests the frontend serves on its shared thread pool, and which get their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import Resolver404, get_resolver

from chronicle.asgi import _takes_djangos_path
from matching.lane_asgi import lane_call

API = "/api/v1/namespaces/shop"
RUN = API + "/workflows/order-1/runs/8c1d52a4-2b3e-4a55-9a0b-3c3f1e7f0c11"


@pytest.mark.parametrize(
    "path",
    [
        API + "/task-queues/orders/workflow-tasks/poll",  # async long-polls
        API + "/task-queues/orders/activity-tasks/poll",
        API + "/workflows/order-1/history",  # waits on its thread for new events or the close
        RUN + "/history",
        API + "/workflows/order-1/query",  # waits on its thread for the worker's answer
    ],
)
def test_polls_and_waiting_views_get_a_thread_of_their_own(path: str) -> None:
    assert _takes_djangos_path(path)


@pytest.mark.parametrize(
    "path",
    [
        API + "/workflows",  # start
        API + "/task-queues/orders/build-ids",
        API + "/workflows/order-1/signal",
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
    ],
)
def test_token_calls_take_the_lean_lane_and_django_serves_no_twin(tail: str) -> None:
    path = API + "/task-queues/orders/" + tail
    match = lane_call(path)
    assert match is not None and match["namespace"] == "shop" and match["task_queue"] == "orders"
    with pytest.raises(Resolver404):
        get_resolver().resolve(path)
    assert lane_call(path + "/x") is None and lane_call(API + "/task-queues/a/b/" + tail) is None


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
