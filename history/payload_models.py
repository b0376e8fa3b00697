"""The payload store's tables: payloads too large to keep inline in events, and which runs
refer to each (declared apart from :mod:`history.models`, which imports them)."""

from __future__ import annotations

from django.db import models


class Payload(models.Model):
    """A payload too large to keep inline in an event, stored once per namespace.

    Events carry a reference ``{"metadata", "payload_ref": {"sha256", "size_bytes"}}``
    in its place; the same bytes sent twice share one row. ``last_used_at`` moves
    whenever an event references the row again, so collection spares fresh rows.
    """

    id = models.BigAutoField(primary_key=True)
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE)
    digest = models.CharField(max_length=64)
    data = models.JSONField()
    size = models.IntegerField()
    created_at = models.DateTimeField()
    last_used_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "digest"], name="uniq_payload_digest")]


class PayloadReference(models.Model):
    """That a run's history refers to a stored payload; deleted with the run."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(
        "history.WorkflowExecution", on_delete=models.CASCADE, related_name="payload_refs"
    )
    shard_id = models.IntegerField()
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE)
    digest = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "digest"], name="uniq_payload_ref_per_run")]
        indexes = [models.Index(fields=["namespace", "digest"], name="payload_ref_digest")]
