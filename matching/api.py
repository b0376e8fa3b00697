"""Worker endpoints: async long-polls for tasks, and the token-based responses.

The polls are async Django views (DRF has no async views); they share the same
authentication, tenancy gate, JSON vetting and error shape as the DRF endpoints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar

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
from chronicle.errors import ChronicleError
from chronicle.openapi import endpoint
from history import kernel
from history.kernel._mutation import task_wakeup_key
from history.kernel.tokens import TaskScope
from history.kernel.versioning import MAX_BUILD_ID_LENGTH, WorkerVersionStamp, dispatch_build_id
from history.models import TaskKind
from matching import schemas, selectors
from matching.dispatch import DispatchThrottled, poll_once
from matching.longpoll import hub
from namespaces.auth import access_namespace, api_key_from_header
from namespaces.models import ApiKey, Namespace
from namespaces.services import build_id_set_current

R = TypeVar("R")

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
                    task = await off_loop(poll_once)(ns, task_queue, kind, identity, worker_version)
                except DispatchThrottled as throttled:
                    await asyncio.sleep(min(throttled.wait, max(0.0, deadline - loop.time())))
                    task = None
                remaining = deadline - loop.time()
                if task is not None or remaining <= 0:
                    if woken.is_set():
                        # The wake-up was for a task this poll did not take: pass it on.
                        hub.wake(wake_key, 1)
                    return JsonResponse(task) if task is not None else HttpResponse(status=204)
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


@csrf_exempt
async def poll_workflow_task(request: HttpRequest, namespace: str, task_queue: str) -> HttpResponse:
    return await _poll(request, namespace, task_queue, TaskKind.WORKFLOW)


@csrf_exempt
async def poll_activity_task(request: HttpRequest, namespace: str, task_queue: str) -> HttpResponse:
    return await _poll(request, namespace, task_queue, TaskKind.ACTIVITY)


class WorkerApi(APIView):
    """Base for token-based worker responses: the key needs the worker role."""

    InputSerializer: type[serializers.Serializer[Any]]

    def gate(self, request: Request, namespace: str) -> Namespace:
        for value in self.kwargs.values():
            refuse_nul(str(value), "the path")
        return access_namespace(request.auth, namespace, "worker")

    def respond(self, request: Request, namespace: str, task_queue: str, action: Callable[..., R]) -> R:
        """Check the key, validate the body with the view's ``InputSerializer`` and hand the
        fields to the kernel ``action`` with the URL's namespace and queue as the token's
        scope (the kernel refuses a token from elsewhere); its return value is the
        caller's to answer with."""
        ns = self.gate(request, namespace)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return action(scope=TaskScope(ns.id, task_queue), **data.validated_data)


class TokenSerializer(serializers.Serializer[Any]):
    task_token = StrictCharField(max_length=8000)
    identity = StrictCharField(max_length=1000, required=False, default="")


class WorkerVersionSerializer(serializers.Serializer[Any]):
    """A worker's build: Temporal's ``WorkerVersionStamp`` / ``WorkerVersionCapabilities``."""

    build_id = StrictCharField(max_length=MAX_BUILD_ID_LENGTH, required=False, default="", allow_blank=True)
    use_versioning = serializers.BooleanField(required=False, default=False)

    def validate(self, attrs: dict[str, Any]) -> Any:
        try:
            return WorkerVersionStamp.from_wire(attrs)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class WorkflowTaskCompleteApi(WorkerApi):
    @extend_schema_serializer(component_name="WorkflowTaskCompletedRequest")
    class InputSerializer(TokenSerializer):
        commands = serializers.ListField(child=serializers.DictField(), required=False, default=list)
        sticky_task_queue = StrictCharField(max_length=1000, required=False, default="", allow_blank=True)
        sticky_schedule_to_start_timeout = serializers.FloatField(required=False, default=0, min_value=0)
        return_new_workflow_task = serializers.BooleanField(required=False, default=False)
        force_create_new_workflow_task = serializers.BooleanField(required=False, default=False)
        query_results = serializers.DictField(child=serializers.DictField(), required=False, default=dict)
        worker_version_stamp = WorkerVersionSerializer(required=False, default=None, allow_null=True)

    @endpoint(
        summary="Complete a workflow task with commands",
        tag="worker",
        request=InputSerializer,
        response=schemas.WorkflowTaskCompletedSerializer,
    )
    def post(self, request: Request, namespace: str, task_queue: str) -> Response:
        result = self.respond(request, namespace, task_queue, kernel.respond_workflow_task_completed)
        return Response(
            {
                "workflow_task": result.new_workflow_task.as_dict() if result.new_workflow_task else None,
                "activity_tasks": result.activity_tasks,
            }
        )


class WorkflowTaskFailApi(WorkerApi):
    @extend_schema_serializer(component_name="WorkflowTaskFailedRequest")
    class InputSerializer(TokenSerializer):
        cause = StrictCharField(max_length=200)
        failure = serializers.DictField(required=False, default=dict)

    @endpoint(
        summary="Fail a workflow task",
        tag="worker",
        request=InputSerializer,
    )
    def post(self, request: Request, namespace: str, task_queue: str) -> Response:
        self.respond(request, namespace, task_queue, kernel.respond_workflow_task_failed)
        return Response({})


class ActivityTaskCompleteApi(WorkerApi):
    @extend_schema_serializer(component_name="ActivityTaskCompletedRequest")
    class InputSerializer(TokenSerializer):
        result = serializers.JSONField(required=False, default=None)

    @endpoint(
        summary="Complete an activity task with its result",
        tag="worker",
        request=InputSerializer,
    )
    def post(self, request: Request, namespace: str, task_queue: str) -> Response:
        self.respond(request, namespace, task_queue, kernel.respond_activity_task_completed)
        return Response({})


class ActivityTaskFailApi(WorkerApi):
    @extend_schema_serializer(component_name="ActivityTaskFailedRequest")
    class InputSerializer(TokenSerializer):
        failure = serializers.DictField()
        last_heartbeat_details = serializers.JSONField(required=False, default=None)

    @endpoint(
        summary="Fail an activity task (it may be retried)",
        tag="worker",
        request=InputSerializer,
    )
    def post(self, request: Request, namespace: str, task_queue: str) -> Response:
        self.respond(request, namespace, task_queue, kernel.respond_activity_task_failed)
        return Response({})


class ActivityTaskCanceledApi(WorkerApi):
    @extend_schema_serializer(component_name="ActivityTaskCanceledRequest")
    class InputSerializer(TokenSerializer):
        details = serializers.JSONField(required=False, default=None)

    @endpoint(
        summary="Report an activity task as canceled",
        tag="worker",
        request=InputSerializer,
    )
    def post(self, request: Request, namespace: str, task_queue: str) -> Response:
        self.respond(request, namespace, task_queue, kernel.respond_activity_task_canceled)
        return Response({})


class ActivityTaskHeartbeatApi(WorkerApi):
    @extend_schema_serializer(component_name="ActivityTaskHeartbeatRequest")
    class InputSerializer(serializers.Serializer[Any]):
        task_token = StrictCharField(max_length=8000)
        details = serializers.JSONField(required=False, default=None)

    @endpoint(
        summary="Heartbeat an activity task; learn whether it is canceled",
        tag="worker",
        request=InputSerializer,
        response=schemas.HeartbeatResponseSerializer,
    )
    def post(self, request: Request, namespace: str, task_queue: str) -> Response:
        cancel_requested = self.respond(request, namespace, task_queue, kernel.record_activity_task_heartbeat)
        return Response({"cancel_requested": cancel_requested})


class QueryTaskRespondApi(WorkerApi):
    @extend_schema_serializer(component_name="QueryTaskAnswerRequest")
    class InputSerializer(serializers.Serializer[Any]):
        task_token = StrictCharField(max_length=8000)
        answer = serializers.JSONField(required=False, default=None)
        error_message = StrictCharField(required=False, default="", allow_blank=True, max_length=100_000)

    @endpoint(
        summary="Answer a query task",
        tag="worker",
        request=InputSerializer,
    )
    def post(self, request: Request, namespace: str, task_queue: str) -> Response:
        self.respond(request, namespace, task_queue, kernel.respond_query_task_completed)
        return Response({})


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
