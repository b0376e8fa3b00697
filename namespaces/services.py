"""Writes that are not execution history: namespaces, keys, memberships, queue build ids."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from namespaces.auth import hash_key
from namespaces.models import ApiKey, MemberRole, Membership, Namespace, Role, TaskQueueBuildId


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
