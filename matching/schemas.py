"""Response bodies of the worker API, declared for the OpenAPI schema only.

The views build these dicts in the kernel; the serializers here describe them and
are never used to render, so the wire format stays the kernel's.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class ExecutionRefSerializer(serializers.Serializer[Any]):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()


class NameSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()


class HistoryEventSerializer(serializers.Serializer[Any]):
    event_id = serializers.IntegerField()
    event_type = serializers.CharField()
    event_time = serializers.DateTimeField()
    attributes = serializers.DictField()


class EventListSerializer(serializers.Serializer[Any]):
    events = HistoryEventSerializer(many=True)


class QueryTaskDetailSerializer(serializers.Serializer[Any]):
    query_id = serializers.UUIDField()
    query_type = serializers.CharField()
    query_args = serializers.ListField()


class WorkflowTaskSerializer(serializers.Serializer[Any]):
    """A workflow task: the history a worker replays and the token to answer with."""

    task_token = serializers.CharField()
    workflow_execution = ExecutionRefSerializer()
    workflow_type = NameSerializer()
    workflow_execution_task_queue = NameSerializer()
    attempt = serializers.IntegerField()
    previous_started_event_id = serializers.IntegerField()
    started_event_id = serializers.IntegerField()
    history = EventListSerializer()
    query = QueryTaskDetailSerializer(allow_null=True, help_text="set when the task is a query")


class ActivityTaskSerializer(serializers.Serializer[Any]):
    """An activity task: what to run, with which input, under which timeouts."""

    task_token = serializers.CharField()
    workflow_execution = ExecutionRefSerializer()
    workflow_type = NameSerializer()
    workflow_namespace = serializers.CharField()
    activity_id = serializers.CharField()
    activity_type = NameSerializer()
    task_queue = serializers.CharField()
    input = serializers.ListField()
    header = serializers.DictField()
    attempt = serializers.IntegerField()
    scheduled_event_id = serializers.IntegerField()
    scheduled_time = serializers.DateTimeField()
    current_attempt_scheduled_time = serializers.DateTimeField()
    started_time = serializers.DateTimeField(allow_null=True)
    schedule_to_close_timeout = serializers.FloatField()
    start_to_close_timeout = serializers.FloatField()
    heartbeat_timeout = serializers.FloatField()
    heartbeat_details = serializers.JSONField(allow_null=True)
    retry_policy = serializers.DictField(allow_null=True)


class RunClosedSerializer(serializers.Serializer[Any]):
    event = serializers.DictField(help_text="the run's close event, as the history has it")
    new_run_id = serializers.UUIDField(
        allow_null=True, help_text="the run that carries on (continue-as-new, retry, cron), if any"
    )


class WorkflowTaskCompletedSerializer(serializers.Serializer[Any]):
    workflow_task = WorkflowTaskSerializer(allow_null=True, help_text="the next task, when asked for")
    activity_tasks = ActivityTaskSerializer(many=True, help_text="activities started eagerly")
    closed = RunClosedSerializer(required=False, help_text="present when this completion closed the run")
    recorded_events = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="the events this completion wrote, when asked for (return_recorded_events)",
    )


class ActivityTaskReportedSerializer(serializers.Serializer[Any]):
    workflow_task = WorkflowTaskSerializer(
        required=False,
        help_text="the run's next workflow task, started for this worker, when it offered to take it",
    )
    workflow_task_ahead = WorkflowTaskCompletedSerializer(
        required=False,
        help_text="the completion of the workflow task the worker ran ahead, when it was recorded",
    )


class HeartbeatResponseSerializer(serializers.Serializer[Any]):
    cancel_requested = serializers.BooleanField()


class PollerSerializer(serializers.Serializer[Any]):
    identity = serializers.CharField()
    build_id = serializers.CharField(allow_null=True, help_text="null for an unversioned poller")
    task_type = serializers.ChoiceField(["workflow", "activity"])
    last_access_time = serializers.DateTimeField()


class BacklogSerializer(serializers.Serializer[Any]):
    task_type = serializers.ChoiceField(["workflow", "activity"])
    build_id = serializers.CharField(allow_null=True, help_text="null for tasks of unversioned runs")
    backlog_count = serializers.IntegerField(help_text="visible tasks waiting for a poller")
    oldest_task_age_seconds = serializers.FloatField()


class TaskQueueDescriptionSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    current_build_id = serializers.CharField(allow_null=True, help_text="null when the queue is unversioned")
    pollers = PollerSerializer(many=True, help_text="pollers seen in the last 5 minutes, by build")
    backlog = BacklogSerializer(many=True, help_text="per task type and build")


class BuildIdChangeSerializer(serializers.Serializer[Any]):
    build_id = serializers.CharField()
    set_time = serializers.DateTimeField()
    set_by = serializers.CharField(help_text="the name of the API key that set it")


class BuildIdHistorySerializer(serializers.Serializer[Any]):
    task_queue = serializers.CharField()
    current_build_id = serializers.CharField(allow_null=True)
    changes = BuildIdChangeSerializer(many=True, help_text="newest first")


class ActivityTaskTokenSerializer(serializers.Serializer[Any]):
    """A started activity's token and the task queue its token calls are addressed to."""

    task_token = serializers.CharField()
    task_queue = serializers.CharField()
    run_id = serializers.CharField()
