"""The audit log's one write path: every UI action records itself through ``record``."""

from __future__ import annotations

import contextlib
from typing import Any

from django.db import IntegrityError, transaction

from executions.models import AuditEntry
from namespaces.models import Namespace


def already_done(namespace: Namespace, request_id: str) -> AuditEntry | None:
    """The entry a form with this request id already produced, so a resubmission does nothing."""
    return AuditEntry.objects.filter(namespace=namespace, request_id=request_id).first()


def record(
    namespace: Namespace,
    *,
    actor: str,
    action: str,
    request_id: str,
    reason: str = "",
    workflow_id: str = "",
    run_id: str | None = None,
    target: str = "",
    details: dict[str, Any] | None = None,
    old: Any = None,
    new: Any = None,
    result: str = "",
) -> AuditEntry:
    """Record one action; the same form submitted twice at once keeps the first on record."""
    with contextlib.suppress(IntegrityError), transaction.atomic():
        AuditEntry.objects.create(
            namespace=namespace,
            actor=actor,
            action=action,
            workflow_id=workflow_id,
            run_id=run_id,
            target=target,
            reason=reason,
            details=details or {},
            old=old,
            new=new,
            request_id=request_id,
            result=result,
        )
    return AuditEntry.objects.get(namespace=namespace, request_id=request_id)
