"""The worker's polls on the lean lane: a poll given up when its worker goes away.

Through the frontend's ASGI application on the real PostgreSQL. A poll that waits and
whose client disconnects stops waiting at once, answers nothing, and takes no task added
after: the next poller gets it.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import async_to_sync

from history.models import Task
from namespaces.models import Namespace
from tests import asgi_client
from tests.asgi_client import AsgiResponse, asgi_request
from tests.factories import ExecutionFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "polls"


def _url(namespace: Namespace, kind: str = "workflow") -> str:
    return f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}/{kind}-tasks/poll"


def test_a_poll_whose_worker_went_away_stops_and_takes_nothing(
    namespace: Namespace, authorization: str
) -> None:
    async def poll_then_leave() -> tuple[AsgiResponse, float]:
        gone = asyncio.Event()
        raw = json.dumps({"identity": "w1", "timeout": 20}).encode()
        polling = asyncio.ensure_future(
            asgi_client.asgi_call("POST", _url(namespace), raw, authorization=authorization, gone=gone)
        )
        await asyncio.sleep(0.5)  # the poll now waits on an empty queue
        left = time.monotonic()
        gone.set()
        answer = await asyncio.wait_for(polling, 5)
        return answer, time.monotonic() - left

    answer, took = async_to_sync(poll_then_leave)()

    assert answer.status_code == 0, "nothing is sent to a client that went away"
    assert took < 2, "the poll stopped waiting when its client left"
    run = ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    time.sleep(0.3)
    assert Task.objects.filter(run_id=run.run_id).count() == 1, "the task waits for a live poller"
    body = json.dumps({"identity": "w2", "timeout": 2})
    taken = asgi_request("POST", _url(namespace), body, authorization=authorization)
    assert taken.status_code == 200 and taken.json()["workflow_execution"]["run_id"] == str(run.run_id)


@pytest.mark.parametrize("kind", ["workflow", "activity"])
def test_a_poll_refuses_other_verbs_and_bad_bodies_before_anything(
    namespace: Namespace, authorization: str, kind: str
) -> None:
    url = _url(namespace, kind)

    refused = asgi_request("GET", url, authorization=authorization)
    assert refused.status_code == 405 and refused.json()["code"] == "method_not_allowed"
    for body in ('{"max_tasks": 33}', '{"timeout": "soon"}'):
        answer = asgi_request("POST", url, body, authorization=authorization)
        assert answer.status_code == 400 and answer.json()["code"] == "invalid_argument", answer.content
    unknown = asgi_request("POST", url, "{}", authorization="Bearer chr_nope_nope")
    assert unknown.status_code == 401
