"""State of the outside view that is not an execution's: batch operations.

A batch job applies one operation (reset, terminate, cancel, signal) to every run a
visibility query matched when the job was created. The runner
(``manage.py run_batch_jobs``) works through those runs in run-id order and records
its progress here after each chunk, so a crashed runner's successor resumes after the
last recorded run.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from django.conf import settings
from django.db import models
from django.db.models import Q


class BatchOperation(models.TextChoices):
    RESET = "reset"
    TERMINATE = "terminate"
    CANCEL = "cancel"
    SIGNAL = "signal"


class BatchState(models.TextChoices):
    RUNNING = "Running"
    COMPLETED = "Completed"
    STOPPED = "Stopped"
    FAILED = "Failed"


MAX_RECORDED_FAILURES = 100


class BatchJob(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE)
    job_id = models.CharField(max_length=200)
    operation = models.CharField(max_length=16, choices=BatchOperation.choices)
    query = models.TextField()
    # Per operation: reset {reset_type, reapply_signals}; signal {signal_name, input}.
    params = models.JSONField(default=dict)
    reason = models.TextField()
    created_by = models.CharField(max_length=1000, default="")
    state = models.CharField(max_length=16, choices=BatchState.choices, default=BatchState.RUNNING)
    stop_reason = models.TextField(default="")
    # Operations per second across all the job's items; an operator may change it while it runs.
    rps = models.FloatField(default=50.0)
    total = models.IntegerField(default=0)
    done = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    # The first MAX_RECORDED_FAILURES item failures: {workflow_id, run_id, code, message}.
    failures = models.JSONField(default=list)
    # Keyset cursor: every run with a run id up to this one has been processed.
    last_run_id = models.UUIDField(null=True, blank=True)
    lease_owner = models.CharField(max_length=200, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "job_id"], name="uniq_batch_job_id"),
            # Temporal's default: one running batch operation per namespace.
            models.UniqueConstraint(
                fields=["namespace"], condition=Q(state="Running"), name="one_running_batch_per_namespace"
            ),
        ]
        indexes = [
            models.Index(fields=["namespace", "-created_at"], name="batch_ns_created"),
            models.Index(fields=["state", "lease_expires_at"], name="batch_claim"),
        ]

    def __str__(self) -> str:
        return f"{self.operation} {self.job_id}"


class AuditAction(models.TextChoices):
    """What an audit entry records. Execution actions name a run; the rest name a target."""

    TERMINATE = "terminate"
    CANCEL = "cancel"
    SIGNAL = "signal"
    RESET = "reset"
    QUERY = "query"
    BATCH_START = "batch.start"
    BATCH_RATE = "batch.rate"
    BATCH_STOP = "batch.stop"
    VIEW_SAVE = "view.save"
    VIEW_DELETE = "view.delete"
    SCHEDULE_PAUSE = "schedule.pause"
    SCHEDULE_UNPAUSE = "schedule.unpause"
    SCHEDULE_TRIGGER = "schedule.trigger"
    SCHEDULE_BACKFILL = "schedule.backfill"
    SCHEDULE_DELETE = "schedule.delete"
    SETTINGS_CHANGE = "settings.change"
    RATE_LIMIT_CHANGE = "rate_limit.change"
    SEARCH_ATTRIBUTE_ADD = "search_attribute.add"
    MEMBER_CHANGE = "member.change"
    API_KEY_CREATE = "api_key.create"
    API_KEY_REVOKE = "api_key.revoke"


EXECUTION_ACTIONS = frozenset(
    {AuditAction.TERMINATE, AuditAction.CANCEL, AuditAction.SIGNAL, AuditAction.RESET}
)


class AuditEntry(models.Model):
    """One action taken from the UI: who did what to which run or setting, when and why.

    ``request_id`` comes from the confirmation form, so a form submitted twice records
    (and performs) its action once. Execution actions fill ``workflow_id``/``run_id``;
    other actions name their ``target`` (a schedule id, a setting, a key) and, for a
    change, keep the value before and after in ``old``/``new``.
    """

    namespace = models.ForeignKey(
        "namespaces.Namespace", on_delete=models.CASCADE, related_name="audit_entries"
    )
    actor = models.CharField(max_length=150)
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    workflow_id = models.CharField(max_length=1000, blank=True, default="")
    run_id = models.UUIDField(null=True, blank=True)
    target = models.CharField(max_length=1000, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=64)
    result = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "request_id"], name="uniq_audit_request"),
        ]
        indexes = [
            models.Index(fields=["namespace", "workflow_id", "-created_at"], name="audit_by_workflow"),
            models.Index(fields=["namespace", "-created_at"], name="audit_by_time"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.workflow_id or self.target}"


class SavedView(models.Model):
    """A named executions-list query kept on the server, personal or shared with the namespace.

    Anyone may save a personal view; sharing one (and deleting someone else's shared view)
    takes the operator or admin role, the roles trusted to act on the runs a view selects.
    """

    namespace = models.ForeignKey(
        "namespaces.Namespace", on_delete=models.CASCADE, related_name="saved_views"
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    name = models.CharField(max_length=200)
    query = models.TextField(blank=True, default="")
    # Optional list settings the view restores: a column list and a sort ("StartTime desc").
    columns = models.JSONField(default=list, blank=True)
    sort = models.CharField(max_length=64, blank=True, default="")
    shared = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "owner", "name"], name="uniq_saved_view_name"),
        ]
        indexes = [models.Index(fields=["namespace", "shared", "name"], name="saved_view_ns")]

    def __str__(self) -> str:
        return self.name

    @property
    def list_params(self) -> str:
        """The executions list's query string that opens this view (its query and sort)."""
        params = {"q": self.query}
        field, _, direction = self.sort.partition(" ")
        if field:
            params.update(sort=field, dir=direction or "desc")
        return urlencode(params)
