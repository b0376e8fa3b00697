"""Response bodies of the client API, declared for the OpenAPI schema only.

The views render the selectors' dicts; these serializers describe them and are
never used to render, so the wire format stays the selectors'.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from matching.schemas import HistoryEventSerializer, WorkflowTaskSerializer


class StartResponseSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    started = serializers.BooleanField(help_text="false when an existing run was reused")
    eager_workflow_task = WorkflowTaskSerializer(
        required=False, help_text="present when eager execution was requested and granted"
    )


class SignalWithStartResponseSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    started = serializers.BooleanField()


class ExecutionSummarySerializer(serializers.Serializer[Any]):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    workflow_type = serializers.CharField()
    task_queue = serializers.CharField()
    status = serializers.CharField()
    start_time = serializers.DateTimeField()
    execution_time = serializers.DateTimeField()
    close_time = serializers.DateTimeField(allow_null=True)
    history_length = serializers.IntegerField()
    history_size_bytes = serializers.IntegerField()
    memo = serializers.DictField()
    search_attributes = serializers.DictField()
    first_run_id = serializers.UUIDField()
    previous_run_id = serializers.UUIDField(allow_null=True)
    new_run_id = serializers.UUIDField(allow_null=True)


class ExecutionPageSerializer(serializers.Serializer[Any]):
    executions = ExecutionSummarySerializer(many=True)
    next_page_token = serializers.CharField(
        allow_null=True, help_text="pass with the same query for the next page; null on the last page"
    )


class CountGroupSerializer(serializers.Serializer[Any]):
    group_values = serializers.ListField(child=serializers.CharField())
    count = serializers.IntegerField()


class ExecutionCountSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    groups = CountGroupSerializer(many=True, help_text="one per ExecutionStatus when group_by is set")


class SearchAttributesSerializer(serializers.Serializer[Any]):
    system = serializers.DictField(child=serializers.CharField(), help_text="name -> type")
    custom = serializers.DictField(child=serializers.CharField(), help_text="name -> type")


class PendingActivitySerializer(serializers.Serializer[Any]):
    activity_id = serializers.CharField()
    activity_type = serializers.CharField()
    state = serializers.CharField()
    attempt = serializers.IntegerField()
    scheduled_event_id = serializers.IntegerField()
    last_failure = serializers.DictField(allow_null=True)
    heartbeat_details = serializers.JSONField(allow_null=True)
    last_heartbeat_time = serializers.DateTimeField(allow_null=True)
    next_attempt_schedule_time = serializers.DateTimeField(allow_null=True)
    last_worker_identity = serializers.CharField()


class PendingWorkflowTaskSerializer(serializers.Serializer[Any]):
    scheduled_event_id = serializers.IntegerField()
    started = serializers.BooleanField()
    attempt = serializers.IntegerField()
    task_queue = serializers.CharField()


class ExecutionDescriptionSerializer(ExecutionSummarySerializer):
    result = serializers.JSONField(allow_null=True)
    failure = serializers.DictField(allow_null=True)
    execution_timeout = serializers.FloatField()
    run_timeout = serializers.FloatField()
    task_timeout = serializers.FloatField()
    pending_activities = PendingActivitySerializer(many=True)
    pending_workflow_task = PendingWorkflowTaskSerializer(allow_null=True)
    sticky_task_queue = serializers.CharField()


class HistoryPageSerializer(serializers.Serializer[Any]):
    events = HistoryEventSerializer(many=True)
    next_after_event_id = serializers.IntegerField(
        allow_null=True, help_text="pass as after_event_id for the next page"
    )
    status = serializers.CharField()
    run_id = serializers.UUIDField()
    new_run_id = serializers.UUIDField(allow_null=True)


class QueryAnswerSerializer(serializers.Serializer[Any]):
    answer = serializers.JSONField(allow_null=True)
