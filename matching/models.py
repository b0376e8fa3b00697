"""The poller registry: who polls which queue for which build, last seen when."""

from __future__ import annotations

from django.db import models


class Poller(models.Model):
    namespace = models.ForeignKey("namespaces.Namespace", on_delete=models.CASCADE)
    task_queue = models.CharField(max_length=1000)
    kind = models.CharField(max_length=16)
    identity = models.CharField(max_length=1000)
    # The build whose tasks this poller takes ('' = an unversioned poller).
    build_id = models.CharField(max_length=255, default="")
    last_seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "task_queue", "kind", "identity", "build_id"], name="uniq_poller_build"
            )
        ]
