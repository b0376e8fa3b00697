"""Tenants: namespaces, their API keys, UI memberships and rate-limit buckets."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class Namespace(models.Model):
    """A tenant. Its limits default to Temporal's server defaults."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=255, unique=True)
    description = models.TextField(blank=True, default="")
    retention_days = models.PositiveIntegerField(default=3)
    # Requests per second across all frontends (0 = unlimited), with a burst multiple.
    request_rps = models.FloatField(default=2400.0)
    request_burst_ratio = models.FloatField(default=2.0)
    # Tasks dispatched per second across all queues of the namespace (0 = unlimited).
    dispatch_rps = models.FloatField(default=0.0)
    history_count_warn = models.PositiveIntegerField(default=10_240)
    history_count_limit = models.PositiveIntegerField(default=51_200)
    history_size_limit_bytes = models.PositiveBigIntegerField(default=50 * 1024 * 1024)
    # Past either, workflow tasks tell the workflow to continue as new (Temporal's 4K events / 4 MiB).
    history_suggest_continue_as_new_events = models.PositiveIntegerField(default=4_096)
    history_suggest_continue_as_new_bytes = models.PositiveBigIntegerField(default=4 * 1024 * 1024)
    # Runs of one workflow id start at least this many seconds apart (continue-as-new, terminate-existing).
    workflow_id_reuse_minimal_interval = models.FloatField(default=1.0)
    payload_warn_bytes = models.PositiveIntegerField(default=512 * 1024)
    payload_limit_bytes = models.PositiveIntegerField(default=2 * 1024 * 1024)
    # Payloads larger than this move out of events into the payload store (0 = keep all inline).
    payload_inline_limit_bytes = models.PositiveIntegerField(default=2 * 1024)
    # Closed runs are archived (history as gzipped JSON lines) before retention deletes them.
    archival_enabled = models.BooleanField(default=False)
    archival_prefix = models.CharField(max_length=500, blank=True, default="")
    max_pending_activities = models.PositiveIntegerField(default=2_000)
    max_pending_children = models.PositiveIntegerField(default=2_000)
    max_signals_per_execution = models.PositiveIntegerField(default=10_000)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class TaskQueueLimit(models.Model):
    """A per-task-queue dispatch rate limit set by a namespace admin."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="queue_limits")
    task_queue = models.CharField(max_length=255)
    dispatch_rps = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "task_queue"], name="uniq_queue_limit")]


class TaskQueueBuildId(models.Model):
    """One change of a task queue's current (default) build id, set by a namespace admin.

    The newest row of a queue is its current build: new runs on the queue are pinned
    to it. Rows are never updated, so the table is also the queue's history of changes.
    A queue with no row is unversioned.
    """

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="build_ids")
    task_queue = models.CharField(max_length=1000)
    build_id = models.CharField(max_length=255)
    set_time = models.DateTimeField(auto_now_add=True)
    set_by = models.CharField(max_length=200, default="", help_text="the API key that set it")

    class Meta:
        indexes = [models.Index(fields=["namespace", "task_queue", "-id"], name="queue_build_newest")]

    @classmethod
    def current_for(cls, namespace: Namespace, task_queue: str) -> str:
        """The queue's current build, or ``""`` (unversioned) when an admin never set one."""
        newest = (
            cls.objects.filter(namespace=namespace, task_queue=task_queue)
            .order_by("-id")
            .values_list("build_id", flat=True)
            .first()
        )
        return newest or ""


class Role(models.TextChoices):
    CLIENT = "client"
    WORKER = "worker"
    ADMIN = "admin"


class ApiKey(models.Model):
    """A namespace-scoped key. Only its SHA-256 is stored; the key is shown once."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    roles = ArrayField(models.CharField(max_length=16, choices=Role.choices))
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Refused from this moment on, like a revoked key (a rotated key's grace period ends here).
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.namespace.name}/{self.name} ({self.prefix}…)"


class OperatorKey(models.Model):
    """A superuser's bearer key for platform-wide provisioning (creating, listing and
    deleting namespaces, managing any namespace).

    Kept apart from ``ApiKey`` on purpose: namespace keys are resolved (and cached) on the
    hot path, and an operator key never is. Its raw form starts ``chrop_`` so the
    provisioning API tells the two apart without a lookup. It acts only while its user is
    an active superuser, checked on every call (provisioning is not hot).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="operator_keys")
    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user}/{self.name} ({self.prefix}…)"


class MemberRole(models.TextChoices):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class Membership(models.Model):
    """A UI user's role in one namespace."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="members")
    role = models.CharField(max_length=16, choices=MemberRole.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "namespace"], name="uniq_membership")]


class RateBucket(models.Model):
    """A token bucket shared by every frontend process (see rate_limits.py)."""

    key = models.CharField(max_length=300, primary_key=True)
    tokens = models.FloatField()
    updated_at = models.DateTimeField()
    granted = models.BooleanField(default=True)
    throttled_count = models.PositiveBigIntegerField(default=0)
    # Tokens handed out since the bucket was created: two readings give the live rate.
    granted_count = models.PositiveBigIntegerField(default=0)


class IndexedValueType(models.TextChoices):
    """The types of search attributes, spelled as Temporal spells them."""

    KEYWORD = "Keyword"
    TEXT = "Text"
    INT = "Int"
    DOUBLE = "Double"
    BOOL = "Bool"
    DATETIME = "Datetime"
    KEYWORD_LIST = "KeywordList"


class SearchAttribute(models.Model):
    """A custom search attribute an admin registered for a namespace."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="search_attributes")
    name = models.CharField(max_length=255)
    type = models.CharField(max_length=16, choices=IndexedValueType.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="uniq_search_attribute")]

    def __str__(self) -> str:
        return f"{self.namespace.name}/{self.name} ({self.type})"
