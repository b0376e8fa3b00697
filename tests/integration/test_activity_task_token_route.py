"""``GET .../workflows/{id}/activities/{activity_id}/task-token``: a worker of the run's own
namespace gets a started activity's token; another namespace's key, a key without the
worker role and bad input change nothing and learn nothing."""

from __future__ import annotations

import pytest

from history import kernel
from namespaces.models import Namespace
from tests.asgi_client import AsgiResponse, asgi_post, asgi_request
from tests.factories import ApiKeyFactory, ExecutionFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "tokens"


def _started_activity(namespace: Namespace, authorization: str) -> str:
    """A run on QUEUE whose activity ``a1`` is started; its workflow id."""
    run = ExecutionFactory(namespace=namespace, task_queue=QUEUE)
    poll = f"/api/v1/namespaces/{namespace.name}/task-queues/{QUEUE}"
    task = asgi_post(f"{poll}/workflow-tasks/poll", {"identity": "w"}, authorization=authorization).json()
    schedule = {
        "command_type": "ScheduleActivityTask",
        "attributes": {"activity_id": "a1", "activity_type": "Charge", "start_to_close_timeout": 30},
    }
    kernel.respond_workflow_task_completed(
        scope=kernel.TaskScope(namespace.id, QUEUE), task_token=task["task_token"], commands=[schedule]
    )
    started = asgi_post(f"{poll}/activity-tasks/poll", {"identity": "w"}, authorization=authorization)
    assert started.status_code == 200, started.content
    return run.workflow_id


def _get(namespace: Namespace, workflow_id: str, authorization: str, query: str = "") -> AsgiResponse:
    path = f"/api/v1/namespaces/{namespace.name}/workflows/{workflow_id}/activities/a1/task-token"
    return asgi_request("GET", path, authorization=authorization, query=query)


def test_a_worker_of_the_namespace_gets_the_token_and_others_are_refused(
    namespace: Namespace, authorization: str
) -> None:
    workflow_id = _started_activity(namespace, authorization)

    found = _get(namespace, workflow_id, authorization)
    assert found.status_code == 200, found.content
    assert found.json()["task_queue"] == QUEUE

    stranger = ApiKeyFactory(namespace=NamespaceFactory()).authorization
    assert _get(namespace, workflow_id, stranger).status_code == 404
    client_only = ApiKeyFactory(namespace=namespace, roles=["client"]).authorization
    assert _get(namespace, workflow_id, client_only).status_code == 403


def test_bad_input_is_a_4xx(namespace: Namespace, authorization: str) -> None:
    workflow_id = _started_activity(namespace, authorization)

    bad_run = _get(namespace, workflow_id, authorization, query="run_id=not-a-uuid")
    assert bad_run.status_code == 400
    unknown = _get(namespace, "nobody", authorization)
    assert unknown.status_code == 404
