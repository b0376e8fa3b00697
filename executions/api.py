"""Client endpoints: list, count, describe, query, cancel, terminate, reset, payloads.

Each view validates its input, passes the tenancy gate, calls one kernel function or
selector and renders the result. Errors render through ``chronicle.api``. The hot client
calls — start, signal-with-start, signal and the history read with its long-poll — are not
views: they are on the lean lane (:mod:`executions.lane`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection
from drf_spectacular.utils import OpenApiResponse, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chronicle.api import StrictCharField, refuse_nul
from chronicle.conf import engine_settings
from chronicle.db import listen_conninfo
from chronicle.errors import ChronicleError, ErrorCode, invalid
from chronicle.openapi import ErrorSerializer, endpoint
from chronicle.waiting_views import waiting_view
from executions import schemas, search_attributes, selectors, visibility
from history import kernel
from history.kernel.queries import forget_query
from history.kernel.reset.reapply import (
    EXCLUDE_TYPE_PREFIX,
    EXCLUDE_TYPES,
    REAPPLY_TYPE_PREFIX,
    REAPPLY_TYPES,
    reapply_choice,
)
from history.models import QueryState, WorkflowQuery
from matching.longpoll import hub
from namespaces.auth import access_namespace
from namespaces.models import IndexedValueType, Namespace

QUERY_HELP = "a visibility query, e.g. WorkflowType = 'Order' AND ExecutionStatus = 'Running'"


class NamespaceApi(APIView):
    role = "client"

    def namespace(self, request: Request, name: str) -> Namespace:
        for value in self.kwargs.values():
            refuse_nul(str(value), "the path")
        return access_namespace(request.auth, name, self.role)


def _wait_for(key: str, remaining: float, ready: Callable[[], bool]) -> None:
    """Block this request's thread until ``ready()`` holds, ``key`` is notified, or the
    safety re-check interval (at most ``remaining`` seconds) passes.

    ``ready`` (the caller's re-read of what it waits for) runs on this thread after the
    wait is registered, so a notification sent while it reads is not missed. The
    request's database connection goes back to the pool before the wait: a long poll
    waits on the listener, not on the database, and many waiting clients must not hold
    the pool.
    """

    def look() -> bool:
        try:
            return ready()
        finally:
            if not connection.in_atomic_block:
                connection.close()

    async def wait() -> None:
        hub.ensure_listening(conninfo)
        timeout = min(remaining, engine_settings().safety_recheck_seconds)
        await hub.wait(key, timeout, ready=sync_to_async(look))

    conninfo = listen_conninfo()
    async_to_sync(wait)()


def query_workflow(
    namespace: Namespace, *, workflow_id: str, run_id: str | None, query_type: str, query_args: list[Any]
) -> Any:
    """Ask a worker and wait for its answer: the one query path of the REST API and the UI.

    Raises ``query_failed`` when the handler failed (or none exists) and
    ``deadline_exceeded`` when no worker answered within the query timeout.
    """
    query = kernel.create_query(
        namespace, workflow_id=workflow_id, run_id=run_id, query_type=query_type, query_args=query_args
    )
    deadline = time.monotonic() + engine_settings().query_timeout_seconds

    def settled() -> bool:
        query.refresh_from_db(from_queryset=WorkflowQuery.objects.filter(shard_id=query.shard_id))
        return query.state != QueryState.PENDING

    try:
        while query.state == QueryState.PENDING:
            remaining = deadline - time.monotonic()
            if remaining > 0:
                _wait_for(f"query:{query.id}", remaining, settled)
            elif not settled():
                raise ChronicleError(
                    ErrorCode.DEADLINE_EXCEEDED,
                    "no worker answered the query in time (is a worker polling the task queue?)",
                )
        if query.state == QueryState.FAILED:
            raise ChronicleError(ErrorCode.QUERY_FAILED, query.error_message)
        return query.answer
    finally:
        forget_query(query)


class WorkflowListApi(NamespaceApi):
    """POST starts a workflow; GET lists runs newest first."""

    @property
    def default_response_headers(self) -> dict[str, str]:
        """The start (POST) is answered by the lean lane: ``Allow`` names it too."""
        headers: dict[str, str] = super().default_response_headers
        headers["Allow"] += ", POST"
        return headers

    @extend_schema_serializer(component_name="ListWorkflowExecutionsParams")
    class ListSerializer(serializers.Serializer[Any]):
        query = serializers.CharField(
            required=False,
            default="",
            allow_blank=True,
            trim_whitespace=False,
            max_length=10_000,
            help_text=QUERY_HELP,
        )
        page_size = serializers.IntegerField(required=False, default=100, min_value=1, max_value=1000)
        next_page_token = StrictCharField(required=False, default="", allow_blank=True, max_length=4096)

    @endpoint(
        summary="List workflow executions matching a visibility query, newest first by default",
        tag="client",
        parameters=[ListSerializer],
        response=schemas.ExecutionPageSerializer,
        operation_id="list_workflow_executions",
    )
    def get(self, request: Request, namespace: str) -> Response:
        ns = self.namespace(request, namespace)
        unknown = sorted(set(request.query_params) - set(self.ListSerializer().fields))
        if unknown:
            # A filter the list does not know would otherwise widen the result silently.
            raise invalid(f"unknown list parameter(s) {', '.join(unknown)}: filter with query=")
        params = self.ListSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        rows, token = selectors.execution_list(ns, **params.validated_data)
        return Response({"executions": rows, "next_page_token": token})


class WorkflowCountApi(NamespaceApi):
    @extend_schema_serializer(component_name="CountWorkflowExecutionsParams")
    class ParamsSerializer(serializers.Serializer[Any]):
        query = serializers.CharField(
            required=False,
            default="",
            allow_blank=True,
            trim_whitespace=False,
            max_length=10_000,
            help_text=QUERY_HELP,
        )
        # allow_blank: "" is one of the choices (no grouping), so the schema must not ask minLength 1.
        group_by = serializers.ChoiceField(
            ["", "ExecutionStatus"], required=False, default="", allow_blank=True
        )

    @endpoint(
        summary="Count workflow executions matching a visibility query, optionally by ExecutionStatus",
        tag="client",
        parameters=[ParamsSerializer],
        response=schemas.ExecutionCountSerializer,
        operation_id="count_workflow_executions",
    )
    def get(self, request: Request, namespace: str) -> Response:
        ns = self.namespace(request, namespace)
        params = self.ParamsSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        return Response(visibility.count_executions(ns, **params.validated_data))


class SearchAttributeListApi(NamespaceApi):
    role = "admin"

    @extend_schema_serializer(component_name="AddSearchAttributeRequest")
    class InputSerializer(serializers.Serializer[Any]):
        name = StrictCharField(max_length=255)
        type = serializers.ChoiceField(IndexedValueType.values)

    @endpoint(
        summary="List the namespace's system and custom search attributes",
        tag="admin",
        response=schemas.SearchAttributesSerializer,
        operation_id="list_search_attributes",
    )
    def get(self, request: Request, namespace: str) -> Response:
        return Response(search_attributes.list_attributes(self.namespace(request, namespace)))

    @endpoint(
        summary="Register a custom search attribute (idempotent for the same type)",
        tag="admin",
        request=InputSerializer,
        response=schemas.SearchAttributesSerializer,
        success=(200, 201),
        operation_id="add_search_attribute",
    )
    def post(self, request: Request, namespace: str) -> Response:
        ns = self.namespace(request, namespace)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        created = search_attributes.add_attribute(
            ns, data.validated_data["name"], data.validated_data["type"]
        )
        return Response(search_attributes.list_attributes(ns), status=201 if created else 200)


class SearchAttributeDetailApi(NamespaceApi):
    role = "admin"

    @endpoint(
        summary="Remove a custom search attribute; values already stored on runs are kept",
        tag="admin",
        operation_id="remove_search_attribute",
    )
    def delete(self, request: Request, namespace: str, name: str) -> Response:
        search_attributes.remove_attribute(self.namespace(request, namespace), name)
        return Response({})


class WorkflowDetailApi(NamespaceApi):
    @endpoint(
        summary="Describe a workflow execution (latest run unless run_id is given)",
        tag="client",
        response=schemas.ExecutionDescriptionSerializer,
    )
    def get(self, request: Request, namespace: str, workflow_id: str, run_id: str | None = None) -> Response:
        ns = self.namespace(request, namespace)
        return Response(selectors.execution_describe(selectors.execution_get(ns, workflow_id, run_id)))


@extend_schema_serializer(component_name="CancelRequest")
class ReasonSerializer(serializers.Serializer[Any]):
    reason = StrictCharField(max_length=10_000, required=False, default="", allow_blank=True)
    identity = StrictCharField(max_length=1000, required=False, default="", allow_blank=True)


class CancelApi(NamespaceApi):
    @endpoint(summary="Request cancellation of a workflow", tag="client", request=ReasonSerializer)
    def post(self, request: Request, namespace: str, workflow_id: str, run_id: str | None = None) -> Response:
        ns = self.namespace(request, namespace)
        data = ReasonSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        kernel.request_cancel_workflow_execution(
            ns, workflow_id=workflow_id, run_id=run_id, **data.validated_data
        )
        return Response({})


class TerminateApi(NamespaceApi):
    @extend_schema_serializer(component_name="TerminateRequest")
    class InputSerializer(ReasonSerializer):
        details = serializers.JSONField(required=False, default=None)

    @endpoint(summary="Terminate a workflow at once", tag="client", request=InputSerializer)
    def post(self, request: Request, namespace: str, workflow_id: str, run_id: str | None = None) -> Response:
        ns = self.namespace(request, namespace)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        kernel.terminate_workflow_execution(ns, workflow_id=workflow_id, run_id=run_id, **data.validated_data)
        return Response({})


@waiting_view
class QueryApi(NamespaceApi):
    @extend_schema_serializer(component_name="QueryRequest")
    class InputSerializer(serializers.Serializer[Any]):
        query_type = StrictCharField(max_length=1000)
        query_args = serializers.ListField(required=False, default=list)

    @endpoint(
        summary="Query a workflow; a worker answers",
        tag="client",
        request=InputSerializer,
        # 504 deadline_exceeded: no worker answered within the server's query timeout.
        response={
            200: schemas.QueryAnswerSerializer,
            504: OpenApiResponse(ErrorSerializer, description="no worker answered the query in time"),
        },
    )
    def post(self, request: Request, namespace: str, workflow_id: str, run_id: str | None = None) -> Response:
        ns = self.namespace(request, namespace)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        answer = query_workflow(ns, workflow_id=workflow_id, run_id=run_id, **data.validated_data)
        return Response({"answer": answer})


RESET_TYPES = ["FirstWorkflowTask", "LastWorkflowTask"]
REAPPLY_TYPE_NAMES = [p + n for n in REAPPLY_TYPES for p in (REAPPLY_TYPE_PREFIX, "")]
EXCLUDE_TYPE_NAMES = [p + n for n in EXCLUDE_TYPES for p in (EXCLUDE_TYPE_PREFIX, "")]


class _ResetPointSerializer(serializers.Serializer[Any]):
    """The point: an explicit ``event_id`` or a ``reset_type``, exactly one of them."""

    event_id = serializers.IntegerField(
        required=False,
        default=None,
        min_value=2,
        help_text="a WorkflowTaskCompleted (or Failed, TimedOut, Started) event id: Temporal's "
        "workflow_task_finish_event_id",
    )
    reset_type = serializers.ChoiceField(RESET_TYPES, required=False, default="", allow_blank=True)
    reapply_signals = serializers.BooleanField(
        required=False, default=True, help_text="false: as excluding RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL"
    )
    reset_reapply_type = serializers.ChoiceField(
        REAPPLY_TYPE_NAMES,
        required=False,
        default="",
        allow_blank=True,
        help_text="Temporal's deprecated include list: ALL_ELIGIBLE (the default: signals and updates), "
        "SIGNAL (signals only) or NONE; the prefix may be left out",
    )
    reset_reapply_exclude_types = serializers.ListField(
        child=serializers.ChoiceField(EXCLUDE_TYPE_NAMES),
        required=False,
        default=list,
        help_text="what not to send to the new run again: SIGNAL (signals received after the point), "
        "UPDATE (updates accepted after the point); NEXUS and CANCEL_REQUEST are accepted and change "
        "nothing. Adds to what reset_reapply_type leaves out",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if (attrs["event_id"] is None) == (not attrs["reset_type"]):
            raise serializers.ValidationError("give exactly one of event_id and reset_type")
        return attrs

    def reapply(self) -> dict[str, bool]:
        """The kernel's ``reapply_signals`` and ``reapply_updates`` for this request."""
        data = self.validated_data
        choice = reapply_choice(
            data["reset_reapply_type"],
            data["reset_reapply_exclude_types"],
            reapply_signals=data["reapply_signals"],
        )
        return {"reapply_signals": choice.signals, "reapply_updates": choice.updates}

    def point(self) -> kernel.ResetPoint:
        data = self.validated_data
        if data["event_id"] is not None:
            return int(data["event_id"])
        return "first" if data["reset_type"] == "FirstWorkflowTask" else "last"


class ResetApi(NamespaceApi):
    @extend_schema_serializer(component_name="ResetWorkflowRequest")
    class InputSerializer(_ResetPointSerializer):
        reason = StrictCharField(max_length=10_000)
        request_id = StrictCharField(max_length=1000, required=False, default="", allow_blank=True)
        identity = StrictCharField(max_length=1000, required=False, default="", allow_blank=True)
        run_id = StrictCharField(max_length=100, required=False, default="", allow_blank=True)

    @endpoint(
        summary="Reset a workflow to a workflow task: a new run from a copy of the history up to it",
        tag="client",
        request=InputSerializer,
        response=schemas.ResetResponseSerializer,
    )
    def post(self, request: Request, namespace: str, workflow_id: str, run_id: str | None = None) -> Response:
        ns = self.namespace(request, namespace)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        new_run_id = kernel.reset_workflow_execution(
            ns,
            workflow_id=workflow_id,
            run_id=run_id or v["run_id"] or None,
            point=data.point(),
            reason=v["reason"],
            **data.reapply(),
            request_id=v["request_id"],
            identity=v["identity"],
        )
        return Response({"run_id": new_run_id})


class ResetPreviewApi(NamespaceApi):
    @extend_schema_serializer(component_name="ResetPreviewParams")
    class ParamsSerializer(_ResetPointSerializer):
        pass

    @endpoint(
        summary="What a reset to this point would keep, drop and re-apply (writes nothing)",
        tag="client",
        parameters=[ParamsSerializer],
        response=schemas.ResetPreviewSerializer,
    )
    def get(self, request: Request, namespace: str, workflow_id: str, run_id: str | None = None) -> Response:
        ns = self.namespace(request, namespace)
        params = self.ParamsSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        preview = kernel.preview_reset(
            ns,
            workflow_id=workflow_id,
            run_id=run_id,
            point=params.point(),
            **params.reapply(),
        )
        return Response(preview)


class PayloadApi(NamespaceApi):
    """Stored payloads, for workers replaying a history and clients reading one."""

    @endpoint(
        summary="Fetch a payload an event refers to by its SHA-256 digest",
        tag="client",
        response=schemas.StoredPayloadSerializer,
    )
    def get(self, request: Request, namespace: str, digest: str) -> Response:
        roles = getattr(request.auth, "roles", None) or []
        self.role = "client" if "client" in roles or "worker" not in roles else "worker"
        ns = self.namespace(request, namespace)
        return Response(selectors.payload_get(ns, digest))
