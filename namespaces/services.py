"""Writes that are not execution history: namespaces, keys, memberships."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from namespaces.auth import hash_key
from namespaces.models import ApiKey, MemberRole, Membership, Namespace, Role


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
