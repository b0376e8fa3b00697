"""Batch-operation endpoints: create (or dry-run), list, describe, change the rate, stop."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from chronicle.api import StrictCharField
from chronicle.openapi import endpoint
from chronicle.strict_fields import StrictFloatField
from executions import batch, schemas
from executions.api import NamespaceApi
from executions.models import BatchOperation


@extend_schema_serializer(component_name="StartBatchOperationRequest")
class CreateSerializer(serializers.Serializer[Any]):
    operation = serializers.ChoiceField(BatchOperation.values)
    query = StrictCharField(max_length=10_000, allow_blank=True, help_text="visibility query; '' = every run")
    reason = StrictCharField(max_length=10_000)
    job_id = StrictCharField(max_length=200, required=False, default="", allow_blank=True)
    rps = StrictFloatField(required=False, default=50.0, help_text="operations per second")
    dry_run = serializers.BooleanField(required=False, default=False)
    identity = StrictCharField(max_length=1000, required=False, default="", allow_blank=True)
    reset_type = serializers.ChoiceField(list(batch.RESET_TYPES), required=False, default="FirstWorkflowTask")
    reapply_signals = serializers.BooleanField(required=False, default=True)
    signal_name = StrictCharField(max_length=1000, required=False, default="", allow_blank=True)
    signal_input = serializers.ListField(required=False, default=list)


class BatchListApi(NamespaceApi):
    @endpoint(
        summary="Start a batch operation over a visibility query (or count its matches with dry_run)",
        tag="batch",
        request=CreateSerializer,
        response={201: schemas.BatchJobSerializer, 200: schemas.BatchDryRunSerializer},
        operation_id="start_batch_operation",
    )
    def post(self, request: Request, namespace: str) -> Response:
        ns = self.namespace(request, namespace)
        data = CreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        params = {k: v[k] for k in ("reset_type", "reapply_signals", "signal_name", "signal_input")}
        batch.validate_params(v["operation"], params)
        if v["dry_run"]:
            return Response(batch.dry_run(ns, v["query"]))
        job = batch.create_job(
            ns,
            operation=v["operation"],
            query=v["query"],
            reason=v["reason"],
            params=params,
            rps=v["rps"],
            job_id=v["job_id"],
            created_by=v["identity"] or f"api key {getattr(request.auth, 'name', '')}",
        )
        return Response(batch.job_describe(job), status=201)

    @endpoint(
        summary="List batch operations, newest first",
        tag="batch",
        response=schemas.BatchJobListSerializer,
        operation_id="list_batch_operations",
    )
    def get(self, request: Request, namespace: str) -> Response:
        ns = self.namespace(request, namespace)
        return Response({"jobs": batch.job_list(ns)})


class BatchDetailApi(NamespaceApi):
    @extend_schema_serializer(component_name="UpdateBatchOperationRequest")
    class UpdateSerializer(serializers.Serializer[Any]):
        rps = StrictFloatField()

    @endpoint(
        summary="Describe a batch operation and its progress",
        tag="batch",
        response=schemas.BatchJobSerializer,
    )
    def get(self, request: Request, namespace: str, job_id: str) -> Response:
        ns = self.namespace(request, namespace)
        return Response(batch.job_describe(batch.job_get(ns, job_id)))

    @endpoint(
        summary="Change a batch operation's rate while it runs",
        tag="batch",
        request=UpdateSerializer,
        response=schemas.BatchJobSerializer,
    )
    def patch(self, request: Request, namespace: str, job_id: str) -> Response:
        ns = self.namespace(request, namespace)
        data = self.UpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(batch.job_describe(batch.set_rps(ns, job_id, data.validated_data["rps"])))


class BatchStopApi(NamespaceApi):
    @extend_schema_serializer(component_name="StopBatchOperationRequest")
    class InputSerializer(serializers.Serializer[Any]):
        reason = StrictCharField(max_length=10_000, required=False, default="", allow_blank=True)

    @endpoint(
        summary="Stop a batch operation; runs already processed stay processed",
        tag="batch",
        request=InputSerializer,
        response=schemas.BatchJobSerializer,
    )
    def post(self, request: Request, namespace: str, job_id: str) -> Response:
        ns = self.namespace(request, namespace)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(batch.job_describe(batch.stop_job(ns, job_id, data.validated_data["reason"])))
