"""Writes that are not execution history: namespaces and their settings, keys, memberships,
queue limits and build ids."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from namespaces.auth import hash_key
from namespaces.models import (
    ApiKey,
    MemberRole,
    Membership,
    Namespace,
    Role,
    TaskQueueBuildId,
    TaskQueueLimit,
)


def namespace_create(*, name: str, **settings: Any) -> Namespace:
    return Namespace.objects.create(name=name, **settings)


def api_key_issue(*, namespace: Namespace, name: str, roles: list[str]) -> tuple[ApiKey, str]:
    """Create a key; the raw key is returned once and never stored."""
    prefix = secrets.token_hex(4)
    raw = f"chr_{prefix}_{secrets.token_urlsafe(24)}"
    key = ApiKey.objects.create(
        namespace=namespace, name=name, prefix=prefix, key_hash=hash_key(raw), roles=roles
    )
    return key, raw


@transaction.atomic
def bootstrap_dev_namespace(existing: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ensure the dev namespace, key and UI user exist; reuse what ``existing`` names."""
    namespace, _ = Namespace.objects.get_or_create(name="default")
    raw = (existing or {}).get("api_key")
    if not raw or not ApiKey.objects.filter(key_hash=hash_key(raw), revoked_at=None).exists():
        _, raw = api_key_issue(namespace=namespace, name="dev", roles=[Role.CLIENT, Role.WORKER, Role.ADMIN])
    user_model = get_user_model()
    password = (existing or {}).get("ui_password") or secrets.token_urlsafe(12)
    user, created = user_model.objects.get_or_create(username="admin")
    if created or not user.check_password(password):
        user.set_password(password)
        user.is_staff = True
        user.is_superuser = True
        user.save()
    Membership.objects.update_or_create(user=user, namespace=namespace, defaults={"role": MemberRole.ADMIN})
    return {"namespace": "default", "api_key": raw, "ui_user": "admin", "ui_password": password}


def build_id_set_current(*, namespace: Namespace, task_queue: str, build_id: str, set_by: str) -> bool:
    """Make ``build_id`` the queue's current build; False when it already was.

    New runs on the queue are pinned to it from the next start on; runs already pinned
    to an older build keep it until they close.
    """
    with transaction.atomic():
        # Serialize concurrent changes of a namespace's builds so "already current" holds;
        # NO KEY UPDATE leaves the key-share locks of inserts referencing the namespace alone.
        Namespace.objects.select_for_update(no_key=True).filter(pk=namespace.pk).first()
        if TaskQueueBuildId.current_for(namespace, task_queue) == build_id:
            return False
        TaskQueueBuildId.objects.create(
            namespace=namespace, task_queue=task_queue, build_id=build_id, set_by=set_by
        )
    return True


# -- namespace settings, as a tenant admin changes them ----------------------------------

GENERAL_SETTINGS = (
    "description",
    "retention_days",
    "history_count_warn",
    "history_count_limit",
    "history_size_limit_bytes",
    "history_suggest_continue_as_new_events",
    "history_suggest_continue_as_new_bytes",
    "workflow_id_reuse_minimal_interval",
    "payload_warn_bytes",
    "payload_limit_bytes",
    "payload_inline_limit_bytes",
    "max_pending_activities",
    "max_pending_children",
    "max_signals_per_execution",
)
RATE_LIMIT_SETTINGS = ("request_rps", "request_burst_ratio", "dispatch_rps")
# (smaller, larger): a warning threshold must not exceed the limit it warns about.
_ORDERED_SETTINGS = (
    ("history_count_warn", "history_count_limit"),
    ("history_suggest_continue_as_new_events", "history_count_limit"),
    ("history_suggest_continue_as_new_bytes", "history_size_limit_bytes"),
    ("payload_warn_bytes", "payload_limit_bytes"),
    ("payload_inline_limit_bytes", "payload_limit_bytes"),
)
Change = dict[str, dict[str, Any]]  # setting -> {"old": ..., "new": ...}


def _settings_errors(namespace: Namespace) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for smaller, larger in _ORDERED_SETTINGS:
        if getattr(namespace, smaller) > getattr(namespace, larger):
            errors.setdefault(smaller, []).append(f"must not be larger than {larger.replace('_', ' ')}")
    if namespace.request_rps <= 0:
        errors.setdefault("request_rps", []).append("must be above 0 (every namespace has a request rate)")
    if namespace.request_burst_ratio < 1:
        errors.setdefault("request_burst_ratio", []).append("must be at least 1")
    if namespace.dispatch_rps < 0:
        errors.setdefault("dispatch_rps", []).append("must be 0 (no limit) or above")
    if namespace.retention_days < 1:
        errors.setdefault("retention_days", []).append("must be at least 1 day")
    return errors


@transaction.atomic
def namespace_settings_update(namespace: Namespace, values: dict[str, Any]) -> Change:
    """Apply new values for settings in GENERAL_SETTINGS or RATE_LIMIT_SETTINGS.

    Returns what changed (old → new) for the audit log; raises ``ValidationError`` (per
    field) and changes nothing when any value is out of range or inconsistent.
    """
    allowed = set(GENERAL_SETTINGS) | set(RATE_LIMIT_SETTINGS)
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise ValidationError({name: ["is not a namespace setting"] for name in unknown})
    locked = Namespace.objects.select_for_update().get(pk=namespace.pk)
    changes: Change = {}
    for name, value in values.items():
        old = getattr(locked, name)
        if old != value:
            changes[name] = {"old": old, "new": value}
            setattr(locked, name, value)
    if not changes:
        return changes
    locked.full_clean(exclude=["name"])
    errors = _settings_errors(locked)
    if errors:
        raise ValidationError(errors)
    locked.save(update_fields=list(changes))
    for name in changes:
        setattr(namespace, name, getattr(locked, name))
    return changes


@transaction.atomic
def queue_limit_set(namespace: Namespace, task_queue: str, dispatch_rps: float | None) -> Change:
    """Set (or, with None or 0, remove) a task queue's dispatch limit; what changed."""
    task_queue = task_queue.strip()
    if not task_queue or len(task_queue) > 255:
        raise ValidationError({"task_queue": ["a task queue name of 1 to 255 characters is required"]})
    if dispatch_rps is not None and dispatch_rps < 0:
        raise ValidationError({"dispatch_rps": ["must be 0 (no limit) or above"]})
    limits = TaskQueueLimit.objects.select_for_update()
    row = limits.filter(namespace=namespace, task_queue=task_queue).first()
    old = row.dispatch_rps if row else None
    new = dispatch_rps or None
    if old == new:
        return {}
    if new is None:
        if row is not None:
            row.delete()
    elif row is None:
        TaskQueueLimit.objects.create(namespace=namespace, task_queue=task_queue, dispatch_rps=new)
    else:
        row.dispatch_rps = new
        row.save(update_fields=["dispatch_rps"])
    return {task_queue: {"old": old, "new": new}}


def _admins(namespace: Namespace) -> int:
    return Membership.objects.filter(namespace=namespace, role=MemberRole.ADMIN).count()


@transaction.atomic
def membership_set(namespace: Namespace, username: str, role: str | None) -> Change:
    """Add a user to the namespace, change their role, or (role None) remove them.

    The last admin can be neither demoted nor removed: a namespace nobody can manage
    would need a superuser to recover.
    """
    if role is not None and role not in MemberRole.values:
        raise ValidationError({"role": [f"must be one of {', '.join(MemberRole.values)}"]})
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise ValidationError({"username": [f"there is no user {username.strip()!r}"]})
    # Lock the namespace's memberships so two admins demoting each other cannot both win.
    list(Membership.objects.select_for_update().filter(namespace=namespace))
    member = Membership.objects.filter(namespace=namespace, user=user).first()
    old = member.role if member else None
    if old == role:
        return {}
    if old == MemberRole.ADMIN and _admins(namespace) == 1:
        raise ValidationError({"role": ["the namespace's last admin cannot be demoted or removed"]})
    if role is None:
        if member is not None:
            member.delete()
    elif member is None:
        Membership.objects.create(namespace=namespace, user=user, role=role)
    else:
        member.role = role
        member.save(update_fields=["role"])
    return {str(user.get_username()): {"old": old, "new": role}}


def api_key_revoke(namespace: Namespace, key_id: int) -> ApiKey:
    """Revoke one of the namespace's keys (idempotent); the frontends refuse it from then on."""
    key = ApiKey.objects.filter(namespace=namespace, pk=key_id).first()
    if key is None:
        raise ValidationError({"key": ["no such API key in this namespace"]})
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key
