"""Provisioning as an operator or tenant admin does it from outside the UI: each operation
calls the service the settings pages call (``namespaces.services``) and writes the audit
entry the UI would, in one transaction, so a change is never left unaudited.

The REST views (:mod:`executions.provisioning_api`) and the management commands are thin
callers of these functions; who may call which is decided by them (see
``docs/provisioning.md``). A refused value raises ``ChronicleError`` (400 with the field
errors) and changes nothing.

Deleting a namespace deletes its audit log with it (entries belong to their namespace),
so that one operation is written to the ``chronicle.audit`` logger instead.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from chronicle.errors import ChronicleError, ErrorCode
from executions import audit
from executions.models import AuditAction
from namespaces import services
from namespaces.models import ApiKey, Membership, Namespace, TaskQueueLimit

SETTINGS = (*services.GENERAL_SETTINGS, *services.RATE_LIMIT_SETTINGS)
T = TypeVar("T")
_log = logging.getLogger("chronicle.audit")


@dataclass(frozen=True)
class Caller:
    """Who asks, as the audit log names them."""

    actor: str
    reason: str = ""


@contextmanager
def _refusals() -> Iterator[None]:
    """A service's ``ValidationError`` as the API's 400 with the field errors."""
    try:
        yield
    except ValidationError as error:
        fields = error.message_dict if hasattr(error, "error_dict") else {"__all__": error.messages}
        message = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, message, details={"fields": fields}) from None


def _audited(
    namespace: Namespace,
    caller: Caller,
    action: str,
    target: str,
    change: Callable[[], tuple[T, services.Change]],
    details: dict[str, Any] | None = None,
) -> T:
    """Run ``change`` and record what it changed (nothing changed: nothing recorded)."""
    with _refusals(), transaction.atomic():
        result, changes = change()
        if changes:
            audit.record(
                namespace,
                actor=caller.actor,
                action=action,
                request_id=uuid.uuid4().hex,
                reason=caller.reason,
                target=target,
                details=details,
                old={name: value["old"] for name, value in changes.items()},
                new={name: value["new"] for name, value in changes.items()},
            )
    return result


# -- namespaces ---------------------------------------------------------------------------


def namespace_create(caller: Caller, name: str, values: dict[str, Any]) -> Namespace:
    """A new namespace with ``values`` set; its audit log's first entry records it."""
    with _refusals(), transaction.atomic():
        namespace, settings_changed = services.namespace_provision(name, values)
        changes = {"namespace": {"old": None, "new": name}, **settings_changed}
        audit.record(
            namespace,
            actor=caller.actor,
            action=AuditAction.SETTINGS_CHANGE,
            request_id=uuid.uuid4().hex,
            reason=caller.reason,
            target="namespace",
            details={"operation": "namespace.create"},
            old={key: value["old"] for key, value in changes.items()},
            new={key: value["new"] for key, value in changes.items()},
        )
    return namespace


def namespace_update(caller: Caller, namespace: Namespace, values: dict[str, Any]) -> services.Change:
    """Change settings; a change of rate limits only is recorded as the rate-limit page records it."""
    rate_only = bool(values) and set(values) <= set(services.RATE_LIMIT_SETTINGS)
    action = AuditAction.RATE_LIMIT_CHANGE if rate_only else AuditAction.SETTINGS_CHANGE

    def update() -> tuple[services.Change, services.Change]:
        changes = services.namespace_settings_update(namespace, values)
        return changes, changes

    return _audited(namespace, caller, action, "namespace", update)


def namespace_delete(caller: Caller, namespace: Namespace, confirm: str) -> dict[str, int]:
    with _refusals():
        removed = services.namespace_delete(namespace, confirm)
    _log.warning(
        "namespace %s deleted by %s (reason: %s); rows removed: %s",
        namespace.name,
        caller.actor,
        caller.reason or "-",
        removed,
        extra={"namespace": namespace.name, "actor": caller.actor, "removed": removed},
    )
    return removed


def namespace_view(namespace: Namespace) -> dict[str, Any]:
    """What describe shows: the settings, and how many keys, members and queue limits."""
    return {
        "name": namespace.name,
        "id": str(namespace.id),
        "created_at": namespace.created_at,
        "settings": {name: getattr(namespace, name) for name in SETTINGS},
        "active_api_keys": _live_keys(ApiKey.objects.filter(namespace=namespace)).count(),
        "members": Membership.objects.filter(namespace=namespace).count(),
        "task_queue_limits": queue_limit_rows(namespace),
    }


def namespace_rows() -> list[dict[str, Any]]:
    return [
        {"name": ns.name, "id": str(ns.id), "description": ns.description, "created_at": ns.created_at}
        for ns in Namespace.objects.order_by("name")
    ]


# -- API keys ------------------------------------------------------------------------------


def _live_keys(keys: QuerySet[ApiKey]) -> QuerySet[ApiKey]:
    return keys.filter(revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )


def key_view(key: ApiKey) -> dict[str, Any]:
    now = timezone.now()
    state = "active"
    if key.revoked_at is not None:
        state = "revoked"
    elif key.expires_at is not None and key.expires_at <= now:
        state = "expired"
    return {
        "id": key.pk,
        "name": key.name,
        "prefix": key.prefix,
        "roles": list(key.roles),
        "state": state,
        "created_at": key.created_at,
        "last_used_at": key.last_used_at,
        "revoked_at": key.revoked_at,
        "expires_at": key.expires_at,
    }


def key_rows(namespace: Namespace) -> list[dict[str, Any]]:
    keys = ApiKey.objects.filter(namespace=namespace).order_by("revoked_at", "-created_at")
    return [key_view(key) for key in keys]


def api_key_create(
    caller: Caller, namespace: Namespace, name: str, roles: list[str], expires_at: datetime | None
) -> tuple[ApiKey, str]:
    """Issue a key; the raw key is in the answer only (the audit log keeps its prefix)."""

    def create() -> tuple[tuple[ApiKey, str], services.Change]:
        key, raw = services.api_key_issue(namespace=namespace, name=name, roles=roles, expires_at=expires_at)
        return (key, raw), {key.name: {"old": None, "new": {"prefix": key.prefix, "roles": key.roles}}}

    return _audited(namespace, caller, AuditAction.API_KEY_CREATE, name.strip(), create)


def api_key_revoke(caller: Caller, namespace: Namespace, key_id: int) -> ApiKey:
    def revoke() -> tuple[ApiKey, services.Change]:
        already = ApiKey.objects.filter(namespace=namespace, pk=key_id, revoked_at__isnull=False).exists()
        key = services.api_key_revoke(namespace, key_id)
        return key, {} if already else {key.name: {"old": "active", "new": "revoked"}}

    return _audited(namespace, caller, AuditAction.API_KEY_REVOKE, f"key {key_id}", revoke)


def api_key_rotate(
    caller: Caller, namespace: Namespace, key_id: int, grace: timedelta
) -> tuple[ApiKey, ApiKey, str]:
    """A successor key now; the old one keeps working for ``grace``, then is refused."""

    def rotate() -> tuple[tuple[ApiKey, ApiKey, str], services.Change]:
        old, new, raw = services.api_key_rotate(namespace, key_id, grace)
        expires = old.expires_at.isoformat() if old.expires_at else None
        change = {
            old.name: {
                "old": {"prefix": old.prefix},
                "new": {"prefix": new.prefix, "old_key_expires_at": expires},
            }
        }
        return (old, new, raw), change

    return _audited(
        namespace,
        caller,
        AuditAction.API_KEY_CREATE,
        f"key {key_id}",
        rotate,
        details={"operation": "api_key.rotate", "rotated_key_id": key_id},
    )


# -- members and queue limits --------------------------------------------------------------


def member_rows(namespace: Namespace) -> list[dict[str, Any]]:
    rows = Membership.objects.filter(namespace=namespace).select_related("user").order_by("user__username")
    return [{"username": row.user.get_username(), "role": row.role} for row in rows]


def member_set(caller: Caller, namespace: Namespace, username: str, role: str | None) -> services.Change:
    """Grant a role, change it, or (role None) revoke the membership."""

    def change() -> tuple[services.Change, services.Change]:
        changes = services.membership_set(namespace, username, role)
        return changes, changes

    return _audited(namespace, caller, AuditAction.MEMBER_CHANGE, username.strip(), change)


def member_create_user(
    caller: Caller, namespace: Namespace, username: str, role: str, email: str
) -> tuple[str, str]:
    """A new account with a one-time password (returned once, never recorded), as a member."""

    def create() -> tuple[tuple[str, str], services.Change]:
        user, password = services.user_create_member(namespace, username, role, email)
        name = str(user.get_username())
        return (name, password), {name: {"old": None, "new": role}}

    return _audited(
        namespace,
        caller,
        AuditAction.MEMBER_CHANGE,
        username.strip(),
        create,
        details={"operation": "user.create"},
    )


def queue_limit_rows(namespace: Namespace) -> list[dict[str, Any]]:
    limits = TaskQueueLimit.objects.filter(namespace=namespace).order_by("task_queue")
    return [{"task_queue": row.task_queue, "dispatch_rps": row.dispatch_rps} for row in limits]


def queue_limit_set(
    caller: Caller, namespace: Namespace, task_queue: str, dispatch_rps: float | None
) -> services.Change:
    """Set a queue's dispatch limit, or (None or 0) remove it."""

    def change() -> tuple[services.Change, services.Change]:
        changes = services.queue_limit_set(namespace, task_queue, dispatch_rps)
        return changes, changes

    return _audited(
        namespace, caller, AuditAction.RATE_LIMIT_CHANGE, f"task queue {task_queue.strip()}", change
    )
