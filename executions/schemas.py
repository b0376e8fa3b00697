"""Response bodies of the client API, declared for the OpenAPI schema only.

The views render the selectors' dicts; these serializers describe them and are
never used to render, so the wire format stays the selectors'.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from matching.schemas import HistoryEventSerializer, WorkflowTaskSerializer


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
    assigned_build_id = serializers.CharField(
        allow_null=True, help_text="the build the run is pinned to; null when unversioned"
    )
    reset_base_run_id = serializers.UUIDField(
        allow_null=True, help_text="a reset run: the run it was reset from"
    )
    reset_event_id = serializers.IntegerField(allow_null=True, help_text="a reset run: its reset point")
    reset_run_id = serializers.UUIDField(allow_null=True, help_text="this run was reset to that run")


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


class PendingChildSerializer(serializers.Serializer[Any]):
    workflow_id = serializers.CharField()
    workflow_type = serializers.CharField()
    run_id = serializers.UUIDField(allow_null=True, help_text="null until the child has started")
    initiated_event_id = serializers.IntegerField()
    parent_close_policy = serializers.CharField()


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
    cron_schedule = serializers.CharField(help_text="empty unless the workflow runs on a cron schedule")
    attempt = serializers.IntegerField()
    pending_activities = PendingActivitySerializer(many=True)
    pending_workflow_task = PendingWorkflowTaskSerializer(allow_null=True)
    sticky_task_queue = serializers.CharField()
    parent_workflow_id = serializers.CharField(allow_null=True)
    parent_run_id = serializers.UUIDField(allow_null=True)
    pending_children = PendingChildSerializer(many=True)


class HistoryPageSerializer(serializers.Serializer[Any]):
    events = HistoryEventSerializer(many=True)
    next_after_event_id = serializers.IntegerField(
        allow_null=True, help_text="pass as after_event_id for the next page"
    )
    status = serializers.CharField()
    run_id = serializers.UUIDField()
    new_run_id = serializers.UUIDField(allow_null=True)


CLOSE_HELP = "present when wait_for_close was asked and the run closed within it: its close page"


class StartResponseSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    started = serializers.BooleanField(help_text="false when an existing run was reused")
    eager_workflow_task = WorkflowTaskSerializer(
        required=False, help_text="present when eager execution was requested and granted"
    )
    close = HistoryPageSerializer(required=False, help_text=CLOSE_HELP)


class SignalWithStartResponseSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    started = serializers.BooleanField()
    close = HistoryPageSerializer(required=False, help_text=CLOSE_HELP)


class StoredPayloadSerializer(serializers.Serializer[Any]):
    sha256 = serializers.CharField(help_text="the digest an event's payload_ref names")
    size_bytes = serializers.IntegerField()
    payload = serializers.JSONField(help_text='the full payload: {"metadata", "data"}')


class QueryAnswerSerializer(serializers.Serializer[Any]):
    answer = serializers.JSONField(allow_null=True)


class ResetResponseSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField(help_text="the new run")


class _ResetActivitySerializer(serializers.Serializer[Any]):
    scheduled_event_id = serializers.IntegerField()
    activity_id = serializers.CharField()
    activity_type = serializers.CharField()


class _CompletedActivitySerializer(_ResetActivitySerializer):
    run_id = serializers.UUIDField()
    event_id = serializers.IntegerField()


class _SignalSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    signal_name = serializers.CharField()


class _UpdateSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    update_id = serializers.CharField()
    name = serializers.CharField()


class _SideEffectSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    event_id = serializers.IntegerField()
    workflow_id = serializers.CharField()


class _ChildStartedSerializer(_SideEffectSerializer):
    run_id_started = serializers.UUIDField(help_text="the child's run")


class _SignalSentSerializer(_SideEffectSerializer):
    signal_name = serializers.CharField()


class _TimerSerializer(serializers.Serializer[Any]):
    timer_id = serializers.CharField()
    fire_at = serializers.DateTimeField()


class _PendingActivityBriefSerializer(_ResetActivitySerializer):
    attempt = serializers.IntegerField()


class _PendingDroppedSerializer(serializers.Serializer[Any]):
    activities = _PendingActivityBriefSerializer(many=True)
    timers = _TimerSerializer(many=True)


class _ChildToStartSerializer(serializers.Serializer[Any]):
    initiated_event_id = serializers.IntegerField()
    workflow_id = serializers.CharField()


class _ChildKeptSerializer(_ChildToStartSerializer):
    run_id = serializers.UUIDField()


class _ExternalRequestSerializer(_ChildToStartSerializer):
    kind = serializers.ChoiceField(choices=["signal", "cancel"])


class ResetPreviewSerializer(serializers.Serializer[Any]):
    base_run_id = serializers.UUIDField()
    current_run_id = serializers.UUIDField()
    terminates_current_run = serializers.BooleanField()
    reset_event_id = serializers.IntegerField()
    reapply_signals = serializers.BooleanField()
    events_kept = serializers.IntegerField()
    events_dropped = serializers.IntegerField()
    events_dropped_by_type = serializers.DictField(child=serializers.IntegerField())
    signals_to_reapply = _SignalSerializer(many=True)
    signals_not_reapplied = _SignalSerializer(
        many=True, help_text="signals after the point left out because reapply_signals is false"
    )
    reapply_updates = serializers.BooleanField()
    updates_to_reapply = _UpdateSerializer(
        many=True, help_text="updates accepted after the point: asked again, with the same update id"
    )
    updates_not_reapplied = _UpdateSerializer(
        many=True, help_text="updates accepted after the point left out because UPDATE is excluded"
    )
    activities_rescheduled = _ResetActivitySerializer(
        many=True, help_text="pending at the point: scheduled again from now"
    )
    timers_restored = _TimerSerializer(many=True)
    children_kept = _ChildKeptSerializer(
        many=True, help_text="started by the point: keep running, and report their close to the new run"
    )
    children_to_start = _ChildToStartSerializer(
        many=True, help_text="initiated but not started by the point: started once (or taken over if already)"
    )
    external_requests_reissued = _ExternalRequestSerializer(
        many=True, help_text="signals and cancels sent before the point without an outcome by then"
    )
    pending_dropped = _PendingDroppedSerializer(help_text="the current run's pending work, ended with it")
    activities_completed_after_point = _CompletedActivitySerializer(
        many=True, help_text="side effects already done; the new run may run them again"
    )
    children_started_after_point = _ChildStartedSerializer(
        many=True, help_text="children already started after the point; they keep running"
    )
    signals_sent_after_point = _SignalSentSerializer(
        many=True, help_text="signals already sent to other workflows; the new run may send them again"
    )


class BatchFailureSerializer(serializers.Serializer[Any]):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    code = serializers.CharField()
    message = serializers.CharField()


class BatchJobSerializer(serializers.Serializer[Any]):
    job_id = serializers.CharField()
    operation = serializers.CharField()
    query = serializers.CharField()
    params = serializers.DictField()
    reason = serializers.CharField()
    created_by = serializers.CharField()
    state = serializers.CharField(help_text="Running, Completed, Stopped or Failed")
    stop_reason = serializers.CharField()
    rps = serializers.FloatField()
    total = serializers.IntegerField(help_text="runs the query matched when the job was created")
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    progress = serializers.FloatField(help_text="(done + failed) / total")
    failures = BatchFailureSerializer(many=True, help_text="the first 100 failed runs")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class BatchJobListSerializer(serializers.Serializer[Any]):
    jobs = BatchJobSerializer(many=True)


class BatchDryRunSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField(help_text="runs the query matches now")
    executions = ExecutionSummarySerializer(many=True, help_text="the first 20, newest first")
