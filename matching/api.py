"""Task-queue reads and admin changes, and a started activity's token.

The worker's hot calls are the lean lane's: its polls (:mod:`matching.lane_polls`) and
its token calls — complete, fail, heartbeat, answer (:mod:`matching.lane`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chronicle.api import StrictCharField, refuse_nul
from chronicle.openapi import endpoint
from history.kernel.versioning import MAX_BUILD_ID_LENGTH
from matching import schemas, selectors
from namespaces.auth import access_namespace
from namespaces.models import ApiKey, Namespace
from namespaces.services import build_id_set_current


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
