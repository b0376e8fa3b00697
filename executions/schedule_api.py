"""Schedule endpoints: create, list, describe, update, delete, pause, unpause, trigger, backfill.

The bodies mirror Temporal's ``Schedule`` (spec, action, policy, state). Each view
validates the body's shape here, and the kernel (``history.kernel.schedules``) checks
what only it can (cron syntax, time zones, the start request) before writing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from chronicle.api import SecondsField, StrictCharField
from chronicle.openapi import endpoint
from executions import selectors
from executions.api import NamespaceApi
from history import kernel

OVERLAP = ["SKIP", "BUFFER_ONE", "BUFFER_ALL", "CANCEL_OTHER", "TERMINATE_OTHER", "ALLOW_ALL"]


@extend_schema_serializer(component_name="ScheduleIntervalSpec")
class IntervalSerializer(serializers.Serializer[Any]):
    every = SecondsField(min_value=1)
    offset = SecondsField(required=False, default=0)


@extend_schema_serializer(component_name="ScheduleSpec")
class SpecSerializer(serializers.Serializer[Any]):
    cron_expressions = serializers.ListField(
        child=StrictCharField(max_length=200), required=False, default=list
    )
    intervals = serializers.ListField(child=IntervalSerializer(), required=False, default=list)
    calendars = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        default=list,
        help_text="ScheduleCalendarSpec objects: second, minute, hour, day_of_month, month, year, "
        "day_of_week, each a list of {start, end, step} ranges",
    )
    start_at = serializers.DateTimeField(required=False, default=None, allow_null=True)
    end_at = serializers.DateTimeField(required=False, default=None, allow_null=True)
    jitter = SecondsField(required=False, default=0)
    time_zone_name = StrictCharField(max_length=200, required=False, default="UTC")


@extend_schema_serializer(component_name="ScheduleActionStartWorkflow")
class ActionSerializer(serializers.Serializer[Any]):
    workflow_type = StrictCharField(max_length=1000)
    workflow_id = StrictCharField(max_length=900)
    task_queue = StrictCharField(max_length=1000)
    input = serializers.ListField(required=False, default=list)
    execution_timeout = SecondsField(required=False, default=0)
    run_timeout = SecondsField(required=False, default=0)
    task_timeout = SecondsField(required=False, default=10)
    retry_policy = serializers.DictField(required=False, default=None, allow_null=True)
    memo = serializers.DictField(required=False, default=dict)
    search_attributes = serializers.DictField(required=False, default=dict)


@extend_schema_serializer(component_name="SchedulePolicy")
class PolicySerializer(serializers.Serializer[Any]):
    overlap = serializers.ChoiceField(OVERLAP, required=False, default="SKIP")
    catchup_window = SecondsField(required=False, default=365 * 86400.0)
    pause_on_failure = serializers.BooleanField(required=False, default=False)


@extend_schema_serializer(component_name="ScheduleState")
class StateSerializer(serializers.Serializer[Any]):
    paused = serializers.BooleanField(required=False, default=False)
    note = StrictCharField(max_length=10_000, required=False, default="", allow_blank=True)
    limited_actions = serializers.BooleanField(required=False, default=False)
    remaining_actions = serializers.IntegerField(required=False, default=0, min_value=0)


@extend_schema_serializer(component_name="Schedule")
class ScheduleSerializer(serializers.Serializer[Any]):
    spec = SpecSerializer()
    action = ActionSerializer()
    policy = PolicySerializer(required=False, default=dict)
    state = StateSerializer(required=False, default=dict)


@extend_schema_serializer(component_name="CreateScheduleRequest")
class CreateSerializer(serializers.Serializer[Any]):
    schedule_id = StrictCharField(max_length=1000)
    schedule = ScheduleSerializer()
    memo = serializers.DictField(required=False, default=dict)


@extend_schema_serializer(component_name="UpdateScheduleRequest")
class UpdateSerializer(serializers.Serializer[Any]):
    schedule = ScheduleSerializer()
    conflict_token = serializers.IntegerField(required=False, default=None, allow_null=True)


@extend_schema_serializer(component_name="ScheduleActionResult")
class ActionResultSerializer(serializers.Serializer[Any]):
    schedule_time = serializers.DateTimeField()
    actual_time = serializers.DateTimeField()
    workflow_id = serializers.CharField()
    run_id = serializers.CharField()


@extend_schema_serializer(component_name="ScheduleInfo")
class InfoSerializer(serializers.Serializer[Any]):
    num_actions = serializers.IntegerField()
    num_actions_missed_catchup_window = serializers.IntegerField()
    num_actions_skipped_overlap = serializers.IntegerField()
    running_actions = serializers.ListField(child=serializers.DictField())
    recent_actions = ActionResultSerializer(many=True)
    next_action_times = serializers.ListField(child=serializers.DateTimeField())
    buffered_actions = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    last_updated_at = serializers.DateTimeField(allow_null=True)


@extend_schema_serializer(component_name="ScheduleDescription")
class DescriptionSerializer(serializers.Serializer[Any]):
    schedule_id = serializers.CharField()
    conflict_token = serializers.IntegerField()
    memo = serializers.DictField()
    schedule = ScheduleSerializer()
    info = InfoSerializer()


@extend_schema_serializer(component_name="SchedulePage")
class PageSerializer(serializers.Serializer[Any]):
    schedules = DescriptionSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


def _jsonable(value: Any) -> Any:
    """Validated data carries datetimes; the schedule stores its definition as JSON."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _definition(schedule: dict[str, Any], memo: dict[str, Any] | None = None) -> kernel.ScheduleDefinition:
    data = _jsonable(schedule)
    state = data.get("state") or {}
    return kernel.ScheduleDefinition(
        spec=data["spec"],
        action=data["action"],
        policy=data.get("policy") or {},
        paused=bool(state.get("paused")),
        note=str(state.get("note") or ""),
        limited_actions=bool(state.get("limited_actions")),
        remaining_actions=int(state.get("remaining_actions") or 0),
        memo=memo or {},
    )


def _described(schedule: Any) -> Response:
    return Response(selectors.schedule_describe(schedule))


class ScheduleListApi(NamespaceApi):
    @endpoint(
        summary="Create a schedule",
        tag="schedules",
        request=CreateSerializer,
        response=DescriptionSerializer,
        success=(201,),
        operation_id="create_schedule",
    )
    def post(self, request: Request, namespace: str) -> Response:
        ns = self.namespace(request, namespace)
        data = CreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        schedule = kernel.create_schedule(
            ns, values["schedule_id"], _definition(values["schedule"], values["memo"])
        )
        return Response(selectors.schedule_describe(schedule), status=201)

    @extend_schema_serializer(component_name="ListSchedulesParams")
    class ListSerializer(serializers.Serializer[Any]):
        page_size = serializers.IntegerField(required=False, default=100, min_value=1, max_value=1000)
        cursor = StrictCharField(
            required=False,
            default="",
            allow_blank=True,  # an empty cursor is the first page, as no cursor is
            max_length=4096,
            help_text="the previous page's next_cursor, as given (opaque; good in this namespace only)",
        )

    @endpoint(
        summary="List schedules in id order",
        tag="schedules",
        parameters=[ListSerializer],
        response=PageSerializer,
        operation_id="list_schedules",
    )
    def get(self, request: Request, namespace: str) -> Response:
        ns = self.namespace(request, namespace)
        params = self.ListSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        rows, cursor = selectors.schedule_list(ns, **params.validated_data)
        return Response({"schedules": rows, "next_cursor": cursor})


class ScheduleDetailApi(NamespaceApi):
    @endpoint(
        summary="Describe a schedule",
        tag="schedules",
        response=DescriptionSerializer,
        operation_id="describe_schedule",
    )
    def get(self, request: Request, namespace: str, schedule_id: str) -> Response:
        ns = self.namespace(request, namespace)
        return _described(selectors.schedule_get(ns, schedule_id))

    @endpoint(
        summary="Delete a schedule (its running workflows keep running)",
        tag="schedules",
        operation_id="delete_schedule",
    )
    def delete(self, request: Request, namespace: str, schedule_id: str) -> Response:
        ns = self.namespace(request, namespace)
        kernel.delete_schedule(ns, schedule_id)
        return Response({})


class ScheduleUpdateApi(NamespaceApi):
    @endpoint(
        summary="Replace a schedule's spec, action, policy and state",
        tag="schedules",
        request=UpdateSerializer,
        response=DescriptionSerializer,
        operation_id="update_schedule",
    )
    def post(self, request: Request, namespace: str, schedule_id: str) -> Response:
        ns = self.namespace(request, namespace)
        data = UpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        current = selectors.schedule_get(ns, schedule_id)
        schedule = kernel.update_schedule(
            ns,
            schedule_id,
            _definition(values["schedule"], current.memo),
            conflict_token=values["conflict_token"],
        )
        return _described(schedule)


@extend_schema_serializer(component_name="ScheduleNoteRequest")
class NoteSerializer(serializers.Serializer[Any]):
    note = StrictCharField(max_length=10_000, required=False, default="", allow_blank=True)


class SchedulePauseApi(NamespaceApi):
    paused = True

    @endpoint(
        summary="Pause (or unpause) a schedule with a note",
        tag="schedules",
        request=NoteSerializer,
        response=DescriptionSerializer,
    )
    def post(self, request: Request, namespace: str, schedule_id: str) -> Response:
        ns = self.namespace(request, namespace)
        data = NoteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        schedule = kernel.pause_schedule(
            ns, schedule_id, paused=self.paused, note=data.validated_data["note"]
        )
        return _described(schedule)


class ScheduleUnpauseApi(SchedulePauseApi):
    paused = False


@extend_schema_serializer(component_name="TriggerScheduleRequest")
class TriggerSerializer(serializers.Serializer[Any]):
    overlap = serializers.ChoiceField(OVERLAP, required=False, default="", allow_blank=True)


class ScheduleTriggerApi(NamespaceApi):
    @endpoint(
        summary="Take the schedule's action now",
        tag="schedules",
        request=TriggerSerializer,
        response=DescriptionSerializer,
        operation_id="trigger_schedule",
    )
    def post(self, request: Request, namespace: str, schedule_id: str) -> Response:
        ns = self.namespace(request, namespace)
        data = TriggerSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return _described(kernel.trigger_schedule(ns, schedule_id, overlap=data.validated_data["overlap"]))


@extend_schema_serializer(component_name="ScheduleBackfill")
class BackfillItemSerializer(serializers.Serializer[Any]):
    start_at = serializers.DateTimeField()
    end_at = serializers.DateTimeField()
    overlap = serializers.ChoiceField(OVERLAP, required=False, default="", allow_blank=True)


@extend_schema_serializer(component_name="BackfillScheduleRequest")
class BackfillSerializer(serializers.Serializer[Any]):
    backfills = BackfillItemSerializer(many=True, allow_empty=False)


class ScheduleBackfillApi(NamespaceApi):
    @endpoint(
        summary="Take the action for every spec time in past ranges",
        tag="schedules",
        request=BackfillSerializer,
        response=DescriptionSerializer,
        operation_id="backfill_schedule",
    )
    def post(self, request: Request, namespace: str, schedule_id: str) -> Response:
        ns = self.namespace(request, namespace)
        data = BackfillSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        backfills = [kernel.Backfill(**item) for item in data.validated_data["backfills"]]
        return _described(kernel.backfill_schedule(ns, schedule_id, backfills))
