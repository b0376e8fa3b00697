"""Writes that are not execution history: namespaces and their settings, keys, memberships,
queue limits and build ids."""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
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

# A namespace's name is one URL path segment: letters, digits, ".", "_" and "-", not
# starting with a punctuation mark (so never "." or "..").
NAMESPACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


def _checked_name(name: str) -> str:
    if not NAMESPACE_NAME.fullmatch(name):
        raise ValidationError(
            {"name": ["1 to 255 letters, digits, '.', '_' or '-', starting with a letter or digit"]}
        )
    if Namespace.objects.filter(name=name).exists():
        raise ValidationError({"name": [f"namespace {name!r} already exists"]})
    return name


def namespace_create(*, name: str, **settings: Any) -> Namespace:
    """A namespace with these settings as given (tests and benchmarks set any field);
    provisioning goes through :func:`namespace_provision`, which checks the values."""
    return Namespace.objects.create(name=_checked_name(name), **settings)


@transaction.atomic
def namespace_provision(name: str, values: dict[str, Any]) -> tuple[Namespace, Change]:
    """Create a namespace and apply ``values`` through the settings page's own checks
    (:func:`namespace_settings_update`); on any refusal nothing is created."""
    namespace = namespace_create(name=name)
    return namespace, namespace_settings_update(namespace, values)


@transaction.atomic
def namespace_delete(namespace: Namespace, confirm: str) -> dict[str, int]:
    """Delete the namespace and everything it holds (runs, history, keys, members, audit
    log); ``confirm`` must repeat its name. Returns the rows removed per model."""
    if confirm != namespace.name:
        raise ValidationError({"confirm": [f"type the namespace's name ({namespace.name!r}) to delete it"]})
    _, removed = Namespace.objects.filter(pk=namespace.pk).delete()
    return dict(removed)


def _checked_key_fields(name: str, roles: list[str], expires_at: datetime | None) -> str:
    errors: dict[str, list[str]] = {}
    name = name.strip()
    if not name or len(name) > 200:
        errors["name"] = ["a key name of 1 to 200 characters is required"]
    if not roles or not set(roles) <= set(Role.values):
        errors["roles"] = [f"one or more of {', '.join(Role.values)}"]
    if expires_at is not None and expires_at <= timezone.now():
        errors["expires_at"] = ["must be in the future"]
    if errors:
        raise ValidationError(errors)
    return name


def api_key_issue(
    *, namespace: Namespace, name: str, roles: list[str], expires_at: datetime | None = None
) -> tuple[ApiKey, str]:
    """Create a key; the raw key is returned once and never stored."""
    name = _checked_key_fields(name, roles, expires_at)
    prefix = secrets.token_hex(4)
    raw = f"chr_{prefix}_{secrets.token_urlsafe(24)}"
    key = ApiKey.objects.create(
        namespace=namespace,
        name=name,
        prefix=prefix,
        key_hash=hash_key(raw),
        roles=sorted(set(roles), key=list(Role.values).index),
        expires_at=expires_at,
    )
    return key, raw


@transaction.atomic
def api_key_rotate(namespace: Namespace, key_id: int, grace: timedelta) -> tuple[ApiKey, ApiKey, str]:
    """Issue a successor of a live key (same name and roles) and let the old one expire
    after ``grace`` (sooner if it already would): workers switch keys without a gap.

    Returns (the old key, the new key, the new raw key, shown once)."""
    if grace < timedelta(0) or grace > timedelta(days=365):
        raise ValidationError({"grace_seconds": ["must be between 0 and 365 days"]})
    old = ApiKey.objects.select_for_update().filter(namespace=namespace, pk=key_id).first()
    now = timezone.now()
    if old is None:
        raise ValidationError({"key": ["no such API key in this namespace"]})
    if old.revoked_at is not None or (old.expires_at is not None and old.expires_at <= now):
        raise ValidationError({"key": ["a revoked or expired key cannot be rotated"]})
    new, raw = api_key_issue(namespace=namespace, name=old.name, roles=list(old.roles))
    if old.expires_at is None or old.expires_at > now + grace:
        old.expires_at = now + grace
        old.save(update_fields=["expires_at"])
    return old, new, raw


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


@transaction.atomic
def user_create_member(namespace: Namespace, username: str, role: str, email: str = "") -> tuple[Any, str]:
    """Create an account for someone who has none yet and make them a member with ``role``.

    Returns (the user, a one-time password): only its hash is stored, so it is shown once;
    the person signs in with it and changes it. An existing username is refused rather
    than taken over: a tenant admin manages their namespace, not other people's accounts.
    """
    user_model = get_user_model()
    username = username.strip()
    user: AbstractBaseUser = user_model(username=username, email=email.strip())
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as error:
        raise ValidationError(
            {"username" if name == "__all__" else name: msgs for name, msgs in error.message_dict.items()}
        ) from None
    if role not in MemberRole.values:
        raise ValidationError({"role": [f"must be one of {', '.join(MemberRole.values)}"]})
    password = secrets.token_urlsafe(12)
    user.set_password(password)
    user.save()
    membership_set(namespace, username, role)
    return user, password
