"""Which API requests the frontend serves on its shared thread pool, and which get their own."""

from __future__ import annotations

import pytest

from chronicle.asgi import _takes_djangos_path

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
        API + "/task-queues/orders/workflow-tasks/complete",
        API + "/task-queues/orders/activity-tasks/complete",
        API + "/workflows/order-1/signal",
        API + "/no-such-endpoint",  # answered 404 from the pool
    ],
)
def test_views_that_answer_at_once_share_the_pool(path: str) -> None:
    assert not _takes_djangos_path(path)
