"""Operator keys: the bearer credential of platform-wide provisioning.

Creating, listing and deleting namespaces is above any tenant, so no namespace API key
may do it. An operator key belongs to a Django superuser and acts as that user:

* It is sent like an API key (``Authorization: Bearer chrop_...``), so the CLI, curl and
  scripts use one header for both; a session cookie would need CSRF handling and a
  password in every script.
* It is kept out of the hot path. The worker and client calls resolve namespace keys
  through ``namespaces.auth`` (a per-process cache, one indexed lookup on a miss) and
  never look at this table: an operator key sent there is just an unknown key. Only the
  provisioning views read it, told apart by the ``chrop_`` prefix without a lookup.
* It is as strong as its user right now: each call checks that the user is still active
  and a superuser, and that the key is neither revoked nor expired (no cache: the
  provisioning calls are few), so demoting or deactivating the user ends its keys.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from chronicle.errors import ChronicleError, ErrorCode
from namespaces.auth import api_key_from_header, hash_key
from namespaces.models import ApiKey, OperatorKey

PREFIX = "chrop_"
_LAST_USED_GRANULARITY = timedelta(seconds=60)


def is_operator_token(token: str) -> bool:
    return token.startswith(PREFIX)


def operator_key_issue(
    *, username: str, name: str, expires_at: datetime | None = None
) -> tuple[OperatorKey, str]:
    """A new key for the superuser ``username``; the raw key is returned once."""
    user = get_user_model().objects.filter(username=username).first()
    errors: dict[str, list[str]] = {}
    if user is None or not user.is_active or not user.is_superuser:
        errors["username"] = [f"{username!r} is not an active superuser (see manage.py createsuperuser)"]
    if not name.strip() or len(name.strip()) > 200:
        errors["name"] = ["a key name of 1 to 200 characters is required"]
    if expires_at is not None and expires_at <= timezone.now():
        errors["expires_at"] = ["must be in the future"]
    if errors or user is None:
        raise ValidationError(errors)
    prefix = secrets.token_hex(4)
    raw = f"{PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    key = OperatorKey.objects.create(
        user=user, name=name.strip(), prefix=prefix, key_hash=hash_key(raw), expires_at=expires_at
    )
    return key, raw


def operator_key_revoke(key_id: int) -> OperatorKey:
    """Revoke an operator key (idempotent)."""
    key = OperatorKey.objects.filter(pk=key_id).first()
    if key is None:
        raise ValidationError({"key": ["no such operator key"]})
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def operator_from_token(token: str) -> OperatorKey:
    """The live operator key for ``token`` (with its user), or 401."""
    key = OperatorKey.objects.select_related("user").filter(key_hash=hash_key(token)).first()
    now = timezone.now()
    if (
        key is None
        or key.revoked_at is not None
        or (key.expires_at is not None and key.expires_at <= now)
        or not key.user.is_active
        or not key.user.is_superuser
    ):
        raise ChronicleError(
            ErrorCode.UNAUTHENTICATED, "unknown, revoked or expired operator key, or its user is no superuser"
        )
    if key.last_used_at is None or now - key.last_used_at > _LAST_USED_GRANULARITY:
        OperatorKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def operator_key_rows() -> list[dict[str, Any]]:
    """Every operator key, newest first, for listing (never the hash)."""
    return [
        {
            "id": key.pk,
            "name": key.name,
            "prefix": key.prefix,
            "username": key.user.get_username(),
            "created_at": key.created_at,
            "last_used_at": key.last_used_at,
            "revoked_at": key.revoked_at,
            "expires_at": key.expires_at,
        }
        for key in OperatorKey.objects.select_related("user").order_by("-created_at")
    ]


class ProvisioningAuthentication(BaseAuthentication):
    """An operator key (``chrop_...``: acts as its superuser) or a namespace API key.

    Only the provisioning views use it; every other API keeps ``ApiKeyAuthentication``.
    """

    def authenticate(self, request: Request) -> tuple[Any, ApiKey | OperatorKey]:
        header = request.META.get("HTTP_AUTHORIZATION") or ""
        token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
        if is_operator_token(token):
            key = operator_from_token(token)
            return (key.user, key)
        return (None, api_key_from_header(header or None))

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"
