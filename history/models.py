"""The state the kernel owns: executions' mutable state, events, pending work, tasks.

Only ``history.kernel`` writes these tables. Every per-execution table carries
``shard_id`` so a distributed PostgreSQL can co-locate an execution's rows.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.db.models.expressions import RawSQL


class ExecutionStatus(models.TextChoices):
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELED = "Canceled"
    TERMINATED = "Terminated"
    CONTINUED_AS_NEW = "ContinuedAsNew"
    TIMED_OUT = "TimedOut"


class WorkflowExecution(models.Model):
    """One run: its mutable state. History is the log; this row is its summary."""

    run_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: every index of the table but the primary key leads with it.
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE, db_index=False)
    workflow_id = models.CharField(max_length=1000)
    workflow_type = models.CharField(max_length=1000)
    task_queue = models.CharField(max_length=1000)
    shard_id = models.IntegerField()
    status = models.CharField(max_length=20, choices=ExecutionStatus.choices)
    next_event_id = models.BigIntegerField(default=1)
    history_size_bytes = models.BigIntegerField(default=0)
    start_time = models.DateTimeField()
    execution_time = models.DateTimeField()
    close_time = models.DateTimeField(null=True, blank=True)
    execution_timeout = models.FloatField(default=0)
    run_timeout = models.FloatField(default=0)
    task_timeout = models.FloatField(default=10)
    execution_expiration_time = models.DateTimeField(null=True, blank=True)
    retry_policy = models.JSONField(null=True, blank=True)
    # Classic cron: each run that completes, fails or times out starts the next at the next time.
    cron_schedule = models.CharField(max_length=1000, default="", blank=True)
    # The result of the chain's last completed cron run, handed to the next runs.
    last_completion_result = models.JSONField(null=True, blank=True)
    attempt = models.IntegerField(default=1)
    memo = models.JSONField(default=dict)
    search_attributes = models.JSONField(default=dict)
    input = models.JSONField(default=list)
    result = models.JSONField(null=True, blank=True)
    failure = models.JSONField(null=True, blank=True)
    create_request_id = models.CharField(max_length=1000, default="")
    first_run_id = models.UUIDField()
    previous_run_id = models.UUIDField(null=True, blank=True)
    new_run_id = models.UUIDField(null=True, blank=True)
    parent_workflow_id = models.CharField(max_length=1000, null=True, blank=True)
    parent_run_id = models.UUIDField(null=True, blank=True)
    # Reset links: a reset run names its base run and the event it was reset to;
    # a base (and the run a reset terminated) names the run it was reset to.
    reset_base_run_id = models.UUIDField(null=True, blank=True)
    reset_event_id = models.BigIntegerField(default=0)
    reset_run_id = models.UUIDField(null=True, blank=True)
    signal_count = models.IntegerField(default=0)
    # Updates admitted or accepted and not yet completed or rejected (``WorkflowUpdate`` rows):
    # zero spares a started workflow task the read for update requests to carry.
    updates_in_flight = models.IntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    # Events with outside causes that arrived while a workflow task was in flight.
    buffered_events = models.JSONField(default=list)
    # The pending workflow task (0 = none). Transient tasks (attempt > 1) write no events.
    wft_scheduled_event_id = models.BigIntegerField(default=0)
    wft_started_event_id = models.BigIntegerField(default=0)
    wft_attempt = models.IntegerField(default=1)
    wft_scheduled_time = models.DateTimeField(null=True, blank=True)
    wft_started_time = models.DateTimeField(null=True, blank=True)
    wft_task_queue = models.CharField(max_length=1000, default="")
    wft_identity = models.CharField(max_length=1000, default="")
    wft_request_id = models.CharField(max_length=100, default="")
    wft_backoff_until = models.DateTimeField(null=True, blank=True)
    last_wft_started_event_id = models.BigIntegerField(default=0)
    last_wft_completed_event_id = models.BigIntegerField(default=0)
    sticky_task_queue = models.CharField(max_length=1000, default="")
    sticky_schedule_to_start_timeout = models.FloatField(default=5.0)
    timer_sequence = models.BigIntegerField(default=0)
    # The build this run is pinned to ('' = unversioned): its tasks go only to that build's pollers.
    assigned_build_id = models.CharField(max_length=255, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "workflow_id"],
                condition=Q(status="Running"),
                name="one_running_run_per_workflow_id",
            )
        ]
        indexes = [
            models.Index(fields=["namespace", "workflow_id", "-start_time"], name="exec_wid_start"),
            # Visibility: each serves a filter and the keyset order (sort key, then run_id).
            models.Index(fields=["namespace", "-start_time", "-run_id"], name="exec_ns_start"),
            models.Index(fields=["namespace", "status", "-start_time", "-run_id"], name="exec_ns_status"),
            models.Index(
                fields=["namespace", "workflow_type", "-start_time", "-run_id"], name="exec_ns_type"
            ),
            models.Index(fields=["namespace", "-close_time", "-run_id"], name="exec_ns_close"),
            # Failure triage: only the runs that closed badly, by close time.
            models.Index(
                fields=["namespace", "close_time"],
                condition=Q(status__in=["Failed", "TimedOut", "Terminated"]),
                name="exec_ns_failed_close",
            ),
            GinIndex(fields=["search_attributes"], name="exec_search_attrs"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id}/{self.run_id}"

    @property
    def is_running(self) -> bool:
        return self.status == ExecutionStatus.RUNNING

    @property
    def has_pending_workflow_task(self) -> bool:
        return self.wft_scheduled_event_id != 0 or self.wft_backoff_until is not None


class HistoryEvent(models.Model):
    """One event of a run's log; (run, event_id) is gapless and strictly increasing."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(
        WorkflowExecution, on_delete=models.CASCADE, related_name="events", db_index=False
    )  # uniq_event_per_run leads with the run
    shard_id = models.IntegerField()
    event_id = models.BigIntegerField()
    event_type = models.CharField(max_length=64)
    event_time = models.DateTimeField()
    attributes = models.JSONField(default=dict)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "event_id"], name="uniq_event_per_run")]

    @staticmethod
    def epoch_time() -> RawSQL:
        """``event_time`` as epoch seconds (``float8``), for reads of a whole long history.

        Django loads each ``timestamptz`` in Python (about 8 µs a value); a float and
        :func:`time_from_epoch` cost a tenth of that, which for the 5,000 events a
        timeline or a reset preview reads is tens of milliseconds a page.
        """
        return RawSQL(f'extract(epoch from "{HistoryEvent._meta.db_table}"."event_time")::float8', ())


def time_from_epoch(seconds: float) -> datetime:
    """An aware UTC datetime from :meth:`HistoryEvent.epoch_time` (exact to the microsecond)."""
    return datetime.fromtimestamp(seconds, tz=UTC)


class ActivityState(models.TextChoices):
    SCHEDULED = "SCHEDULED"
    STARTED = "STARTED"


class PendingActivity(models.Model):
    """An activity between ActivityTaskScheduled and its close event."""

    run = models.ForeignKey(
        WorkflowExecution, on_delete=models.CASCADE, related_name="activities", db_index=False
    )  # uniq_activity_sched leads with the run
    shard_id = models.IntegerField()
    scheduled_event_id = models.BigIntegerField()
    activity_id = models.CharField(max_length=1000)
    activity_type = models.CharField(max_length=1000)
    task_queue = models.CharField(max_length=1000)
    input = models.JSONField(default=list)
    header = models.JSONField(default=dict)
    schedule_to_close_timeout = models.FloatField(default=0)
    schedule_to_start_timeout = models.FloatField(default=0)
    start_to_close_timeout = models.FloatField(default=0)
    heartbeat_timeout = models.FloatField(default=0)
    retry_policy = models.JSONField()
    attempt = models.IntegerField(default=1)
    state = models.CharField(max_length=16, choices=ActivityState.choices)
    first_scheduled_time = models.DateTimeField()
    scheduled_time = models.DateTimeField()
    started_time = models.DateTimeField(null=True, blank=True)
    started_identity = models.CharField(max_length=1000, default="")
    started_request_id = models.CharField(max_length=100, default="")
    last_heartbeat_time = models.DateTimeField(null=True, blank=True)
    heartbeat_details = models.JSONField(null=True, blank=True)
    last_failure = models.JSONField(null=True, blank=True)
    last_worker_identity = models.CharField(max_length=1000, default="")
    cancel_requested_event_id = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "scheduled_event_id"], name="uniq_activity_sched"),
            models.UniqueConstraint(fields=["run", "activity_id"], name="uniq_pending_activity_id"),
        ]


class TaskKind(models.TextChoices):
    WORKFLOW = "workflow"
    ACTIVITY = "activity"


class Task(models.Model):
    """A dispatchable task row written by the kernel and claimed by matching.

    A row is a hint, never the state: matching validates it against the run's mutable
    state when it claims it and drops it if stale, so the kernel never has to wait on
    a row a poller holds.
    """

    id = models.BigAutoField(primary_key=True)
    # No index of its own on either key: task_dispatch_build leads with the namespace,
    # task_run is the run's.
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE, db_index=False)
    task_queue = models.CharField(max_length=1000)
    kind = models.CharField(max_length=16, choices=TaskKind.choices)
    run = models.ForeignKey(WorkflowExecution, on_delete=models.CASCADE, db_index=False)
    shard_id = models.IntegerField()
    scheduled_event_id = models.BigIntegerField(default=0)
    attempt = models.IntegerField(default=1)
    # Indexed only where set (task_query): most tasks carry no query.
    query = models.ForeignKey(
        "WorkflowQuery", null=True, blank=True, on_delete=models.CASCADE, db_index=False
    )
    # Only pollers of this build take the task ('' = unversioned pollers).
    build_id = models.CharField(max_length=255, default="")
    visible_at = models.DateTimeField()
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(
                fields=["namespace", "task_queue", "kind", "build_id", "visible_at", "id"],
                name="task_dispatch_build",
            ),
            models.Index(fields=["run"], name="task_run"),
            models.Index(fields=["query"], name="task_query", condition=models.Q(query__isnull=False)),
        ]


class TimerKind(models.TextChoices):
    USER_TIMER = "user_timer"
    ACTIVITY_TIMEOUT = "activity_timeout"
    ACTIVITY_RETRY = "activity_retry"
    WORKFLOW_TASK_TIMEOUT = "workflow_task_timeout"
    STICKY_TIMEOUT = "sticky_timeout"
    WORKFLOW_RUN_TIMEOUT = "workflow_run_timeout"
    WORKFLOW_EXECUTION_TIMEOUT = "workflow_execution_timeout"
    WORKFLOW_BACKOFF = "workflow_backoff"
    RETENTION = "retention"
    SCHEDULE = "schedule"
    # Transfer duties: due at once, they carry a change to another execution (DESIGN §5).
    START_CHILD = "start_child"
    CHILD_CLOSED = "child_closed"
    PARENT_CLOSE_POLICY = "parent_close_policy"
    SIGNAL_EXTERNAL = "signal_external"
    CANCEL_EXTERNAL = "cancel_external"


class TimerTask(models.Model):
    """Every time-based duty. A pending user timer *is* its USER_TIMER row.

    A row belongs to a run, or (kind SCHEDULE) to a schedule: its next firing.
    """

    id = models.BigAutoField(primary_key=True)
    shard_id = models.IntegerField()
    fire_at = models.DateTimeField()
    kind = models.CharField(max_length=32, choices=TimerKind.choices)
    # timer_run leads with the run: no index of its own.
    run = models.ForeignKey(
        WorkflowExecution, on_delete=models.CASCADE, null=True, blank=True, db_index=False
    )
    # Indexed only where set (timer_schedule): most timers are a run's.
    schedule = models.ForeignKey("Schedule", on_delete=models.CASCADE, null=True, blank=True, db_index=False)
    timer_id = models.CharField(max_length=1000, default="")
    scheduled_event_id = models.BigIntegerField(default=0)
    attempt = models.IntegerField(default=0)
    timeout_type = models.CharField(max_length=32, default="")
    failures = models.IntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["shard_id", "fire_at"], name="timer_due"),
            models.Index(fields=["run", "kind"], name="timer_run"),
            models.Index(
                fields=["schedule"], name="timer_schedule", condition=models.Q(schedule__isnull=False)
            ),
        ]


class Schedule(models.Model):
    """A schedule: when to start which workflow, and what it has done so far.

    ``spec``, ``action`` and ``policy`` hold the client's definition as JSON (the wire
    shape of the REST API); the columns after them are the schedule's own state, which
    only ``history.kernel.schedules`` writes. ``cursor_time`` is the last nominal time
    the schedule has dealt with: the next firing looks for spec times after it.
    """

    id = models.BigAutoField(primary_key=True)
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE)
    schedule_id = models.CharField(max_length=1000)
    shard_id = models.IntegerField()
    spec = models.JSONField(default=dict)
    action = models.JSONField(default=dict)
    policy = models.JSONField(default=dict)
    memo = models.JSONField(default=dict)
    paused = models.BooleanField(default=False)
    note = models.TextField(default="", blank=True)
    limited_actions = models.BooleanField(default=False)
    remaining_actions = models.IntegerField(default=0)
    cursor_time = models.DateTimeField()
    num_actions = models.BigIntegerField(default=0)
    num_actions_missed_catchup_window = models.BigIntegerField(default=0)
    num_actions_skipped_overlap = models.BigIntegerField(default=0)
    # [{"workflow_id", "run_id"}] of started runs not yet seen closed.
    running_actions = models.JSONField(default=list)
    # The last few starts, oldest first: [{"schedule_time", "actual_time", "workflow_id", "run_id"}].
    recent_actions = models.JSONField(default=list)
    # Nominal times waiting for a running action to close (BUFFER_ONE/BUFFER_ALL/CANCEL_OTHER):
    # [{"nominal", "actual", "overlap"}].
    buffered_starts = models.JSONField(default=list)
    conflict_token = models.BigIntegerField(default=0)
    created_at = models.DateTimeField()
    last_updated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "schedule_id"], name="uniq_schedule_id")]

    def __str__(self) -> str:
        return self.schedule_id


class ParentClosePolicy(models.TextChoices):
    TERMINATE = "PARENT_CLOSE_POLICY_TERMINATE"
    ABANDON = "PARENT_CLOSE_POLICY_ABANDON"
    REQUEST_CANCEL = "PARENT_CLOSE_POLICY_REQUEST_CANCEL"


class PendingChildExecution(models.Model):
    """A child between StartChildWorkflowExecutionInitiated and its close event in the parent.

    Kept after the parent closes until its parent close policy has been applied.
    """

    run = models.ForeignKey(WorkflowExecution, on_delete=models.CASCADE, related_name="children")
    shard_id = models.IntegerField()
    initiated_event_id = models.BigIntegerField()
    workflow_id = models.CharField(max_length=1000)
    workflow_type = models.CharField(max_length=1000)
    # The StartChildWorkflowExecutionInitiated attributes the child is started from.
    request = models.JSONField(default=dict)
    parent_close_policy = models.CharField(max_length=40, choices=ParentClosePolicy.choices)
    started_run_id = models.UUIDField(null=True, blank=True)
    started_event_id = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "initiated_event_id"], name="uniq_child_initiated"),
        ]


class ExternalRequestKind(models.TextChoices):
    SIGNAL = "signal"
    CANCEL = "cancel"


class PendingExternalRequest(models.Model):
    """A signal or cancel this run sent to another workflow, until its outcome is recorded."""

    run = models.ForeignKey(WorkflowExecution, on_delete=models.CASCADE, related_name="external_requests")
    shard_id = models.IntegerField()
    initiated_event_id = models.BigIntegerField()
    kind = models.CharField(max_length=16, choices=ExternalRequestKind.choices)
    workflow_id = models.CharField(max_length=1000)
    target_run_id = models.CharField(max_length=64, default="")
    child_workflow_only = models.BooleanField(default=False)
    signal_name = models.CharField(max_length=1000, default="")
    input = models.JSONField(default=list)
    reason = models.TextField(default="")
    workflow_task_completed_event_id = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "initiated_event_id"], name="uniq_external_initiated"),
        ]


class SignalRequest(models.Model):
    """Request ids of signals a run accepted, for deduplication."""

    run = models.ForeignKey(WorkflowExecution, on_delete=models.CASCADE)
    shard_id = models.IntegerField()
    request_id = models.CharField(max_length=1000)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "request_id"], name="uniq_signal_request")]


class QueryState(models.TextChoices):
    PENDING = "PENDING"
    ANSWERED = "ANSWERED"
    FAILED = "FAILED"


class WorkflowQuery(models.Model):
    """A query in flight: never history, answered by a worker through matching."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(WorkflowExecution, on_delete=models.CASCADE)
    shard_id = models.IntegerField()
    query_type = models.CharField(max_length=1000)
    query_args = models.JSONField(default=list)
    state = models.CharField(max_length=16, choices=QueryState.choices, default=QueryState.PENDING)
    answer = models.JSONField(null=True, blank=True)
    error_message = models.TextField(default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # Waiting for the run's next workflow task (sent in its ``queries`` map), not a query task.
    buffered = models.BooleanField(default=False)


class UpdateState(models.TextChoices):
    """How far an update has come (Temporal's lifecycle stages, plus its rejection)."""

    ADMITTED = "ADMITTED"
    ACCEPTED = "ACCEPTED"
    COMPLETED = "COMPLETED"
    REJECTED = "REJECTED"


class WorkflowUpdate(models.Model):
    """An update sent to a run: its request until a worker takes it, then its outcome.

    History holds only accepted updates (``WorkflowExecutionUpdateAccepted`` / ``Completed``);
    this row also remembers the admitted ones a worker has yet to see and the rejected ones,
    so a repeated ``update_id`` gets the first outcome and a waiting caller finds its stage.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(WorkflowExecution, on_delete=models.CASCADE)
    shard_id = models.IntegerField()
    update_id = models.CharField(max_length=1000)
    name = models.CharField(max_length=1000)
    args = models.JSONField(default=list)
    header = models.JSONField(default=dict)
    identity = models.CharField(max_length=1000, default="", blank=True)
    state = models.CharField(max_length=16, choices=UpdateState.choices, default=UpdateState.ADMITTED)
    # The workflow task this update scheduled on an idle run (0: it rode on another's).
    scheduled_task_event_id = models.BigIntegerField(default=0)
    accepted_event_id = models.BigIntegerField(default=0)
    completed_event_id = models.BigIntegerField(default=0)
    # ``{"success": [payload]}`` or ``{"failure": {...}}`` once completed or rejected.
    outcome = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "update_id"], name="uniq_run_update_id")]
        indexes = [models.Index(fields=["run"], name="update_admitted_idx", condition=Q(state="ADMITTED"))]


class Shard(models.Model):
    """A lease on a slice of executions; ``range_id`` fences stale owners."""

    shard_id = models.IntegerField(primary_key=True)
    owner = models.CharField(max_length=200, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    range_id = models.BigIntegerField(default=0)


class ShardOwnerProcess(models.Model):
    """A live shard-owner daemon's registration heartbeat."""

    owner = models.CharField(max_length=200, primary_key=True)
    heartbeat_at = models.DateTimeField()
    started_at = models.DateTimeField()


# Declared apart, imported here so the app registry sees them.
from history.payload_models import Payload as Payload  # noqa: E402
from history.payload_models import PayloadReference as PayloadReference  # noqa: E402

# Test-only:
from history.skipped_clock import SkippedClock  # noqa: E402, F401
