"""Worker endpoints: async long-polls for tasks, and task-queue reads and admin changes.

The polls are async Django views (DRF has no async views); they share the same
authentication, tenancy gate, JSON vetting and error shape as the DRF endpoints. The
token-based responses (complete, fail, heartbeat, answer) are the lean lane's
(:mod:`matching.lane`).
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chronicle.api import StrictCharField, parse_json_body, refuse_nul
from chronicle.conf import engine_settings
from chronicle.db import listen_conninfo, off_loop
from chronicle.errors import ChronicleError, ErrorCode
from chronicle.openapi import endpoint
from history.kernel.versioning import MAX_BUILD_ID_LENGTH, WorkerVersionStamp, dispatch_build_id
from history.kernel.wakeups import task_wakeup_key
from history.models import TaskKind
from matching import schemas, selectors
from matching.dispatch import MAX_TASKS_PER_POLL, DispatchThrottled, poll_batch
from matching.longpoll import hub
from namespaces.auth import access_namespace, api_key_from_header
from namespaces.models import ApiKey, Namespace
from namespaces.services import build_id_set_current

ASYNC_ENDPOINTS = [
    (
        "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/workflow-tasks/poll",
        "post",
        "Poll workflow task",
    ),
    (
        "/api/v1/namespaces/{namespace}/task-queues/{task_queue}/activity-tasks/poll",
        "post",
        "Poll activity task",
    ),
]


def _admit_poller(authorization: str | None, namespace: str) -> tuple[Namespace, str]:
    """Authenticate and gate a poll, and read the LISTEN conninfo: one trip to a thread."""
    key = api_key_from_header(authorization)
    return access_namespace(key, namespace, "worker"), listen_conninfo()


async def _poll(request: HttpRequest, namespace: str, task_queue: str, kind: str) -> HttpResponse:
    try:
        if request.method != "POST":
            return JsonResponse({"code": "method_not_allowed", "message": "use POST"}, status=405)
        refuse_nul(namespace + task_queue, "the path")
        body = parse_json_body(request.body)
        ns, conninfo = await off_loop(_admit_poller)(request.headers.get("Authorization"), namespace)
        identity = str(body.get("identity") or "")[:1000]
        worker_version = WorkerVersionStamp.from_wire(body.get("worker_version_capabilities"))
        batch = "max_tasks" in body
        max_tasks = _max_tasks(body.get("max_tasks")) if batch else 1
        settings = engine_settings()
        timeout = min(
            float(body.get("timeout") or settings.poll_timeout_seconds),
            settings.poll_timeout_seconds,
        )
        hub.ensure_listening(conninfo)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        wake_key = task_wakeup_key(ns.id, kind, task_queue, dispatch_build_id(worker_version))
        while True:
            # Subscribed before the claim: a task added while it runs wakes this poll.
            woken = hub.subscribe(wake_key)
            try:
                try:
                    tasks = await off_loop(poll_batch)(
                        ns, task_queue, kind, identity, worker_version, max_tasks=max_tasks
                    )
                except DispatchThrottled as throttled:
                    await asyncio.sleep(min(throttled.wait, max(0.0, deadline - loop.time())))
                    tasks = []
                remaining = deadline - loop.time()
                if tasks or remaining <= 0:
                    if woken.is_set():
                        # The wake-up was for a task this poll did not take: pass it on.
                        hub.wake(wake_key, 1)
                    if not tasks:
                        return HttpResponse(status=204)
                    return JsonResponse({"tasks": tasks} if batch else tasks[0])
                with suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), min(settings.safety_recheck_seconds, remaining))
            finally:
                hub.unsubscribe(wake_key, woken)
    except ChronicleError as exc:
        response = JsonResponse(exc.as_dict(), status=exc.status)
        if exc.retry_after is not None:
            response["Retry-After"] = str(max(1, int(exc.retry_after + 0.999)))
        return response
    except (TypeError, ValueError) as exc:
        return JsonResponse({"code": "invalid_argument", "message": str(exc)}, status=400)


def _max_tasks(value: Any) -> int:
    """A poll's ``max_tasks``: how many tasks the worker has free slots for (1 to 32)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TASKS_PER_POLL:
        raise ChronicleError(
            ErrorCode.INVALID_ARGUMENT, f"max_tasks must be an integer from 1 to {MAX_TASKS_PER_POLL}"
        )
    return int(value)


@csrf_exempt
async def poll_workflow_task(request: HttpRequest, namespace: str, task_queue: str) -> HttpResponse:
    return await _poll(request, namespace, task_queue, TaskKind.WORKFLOW)


@csrf_exempt
async def poll_activity_task(request: HttpRequest, namespace: str, task_queue: str) -> HttpResponse:
    return await _poll(request, namespace, task_queue, TaskKind.ACTIVITY)


class TaskQueueApi(APIView):
    """Base for reads and admin changes of one task queue, gated by ``role``."""

    role = "client"

    def namespace(self, request: Request, namespace: str) -> Namespace:
        for value in self.kwargs.values():
            refuse_nul(str(value), "the path")
        return access_namespace(request.auth, namespace, self.role)


class TaskQueueDescribeApi(TaskQueueApi):
    @endpoint(
        summary="Describe a task queue: current build, pollers by build, backlog",
        tag="task-queues",
        response=schemas.TaskQueueDescriptionSerializer,
    )
    def get(self, request: Request, namespace: str, task_queue: str) -> Response:
        ns = self.namespace(request, namespace)
        return Response(selectors.task_queue_describe(ns, task_queue))


class ActivityTaskTokenApi(TaskQueueApi):
    """A started activity's task token, by workflow and activity id, to complete it from outside."""

    role = "worker"

    @endpoint(
        summary="Get a started activity's task token by its workflow id and activity id",
        tag="task-queues",
        response=schemas.ActivityTaskTokenSerializer,
    )
    def get(self, request: Request, namespace: str, workflow_id: str, activity_id: str) -> Response:
        ns = self.namespace(request, namespace)
        run_id = request.query_params.get("run_id") or None
        return Response(selectors.started_activity_token(ns, workflow_id, activity_id, run_id))


class BuildIdsApi(TaskQueueApi):
    """The queue's current (default) build id: new runs on the queue are pinned to it."""

    role = "admin"

    @extend_schema_serializer(component_name="SetCurrentBuildIdRequest")
    class InputSerializer(serializers.Serializer[Any]):
        build_id = StrictCharField(min_length=1, max_length=MAX_BUILD_ID_LENGTH)

    @endpoint(
        summary="Get a task queue's current build id and its history of changes",
        tag="task-queues",
        response=schemas.BuildIdHistorySerializer,
    )
    def get(self, request: Request, namespace: str, task_queue: str) -> Response:
        ns = self.namespace(request, namespace)
        return Response(selectors.build_id_history(ns, task_queue))

    @endpoint(
        summary="Set a task queue's current build id (new runs are pinned to it)",
        tag="task-queues",
        request=InputSerializer,
        response=schemas.BuildIdHistorySerializer,
    )
    def post(self, request: Request, namespace: str, task_queue: str) -> Response:
        ns = self.namespace(request, namespace)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = request.auth
        build_id_set_current(
            namespace=ns,
            task_queue=task_queue,
            build_id=data.validated_data["build_id"],
            set_by=key.name if isinstance(key, ApiKey) else "",
        )
        return Response(selectors.build_id_history(ns, task_queue))
