"""API-key authentication and the single tenancy gate for every API call.

``access_namespace`` fetches the namespace named in the URL *and* checks the caller's
key belongs to it with the needed role. A key of another namespace gets 404 (names do
not leak); a key of this namespace without the role gets 403.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from chronicle.errors import ChronicleError, ErrorCode
from namespaces.models import ApiKey, Namespace
from namespaces.rate_limits import request_bucket, take_token

_LAST_USED_GRANULARITY = timedelta(seconds=60)


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def api_key_from_header(header: str | None) -> ApiKey:
    """Resolve ``Bearer <key>`` to a live key or raise 401."""
    if not header or not header.startswith("Bearer "):
        raise ChronicleError(ErrorCode.UNAUTHENTICATED, "send Authorization: Bearer <api key>")
    raw = header[len("Bearer ") :].strip()
    key = (
        ApiKey.objects.select_related("namespace")
        .filter(key_hash=hash_key(raw), revoked_at__isnull=True)
        .first()
    )
    if key is None:
        raise ChronicleError(ErrorCode.UNAUTHENTICATED, "unknown or revoked API key")
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > _LAST_USED_GRANULARITY:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        key = api_key_from_header(request.META.get("HTTP_AUTHORIZATION"))
        return (None, key)

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


def access_namespace(key: object, namespace_name: str, role: str) -> Namespace:
    """Return the namespace if ``key`` may act on it with ``role``; enforce its rate."""
    if not isinstance(key, ApiKey):
        raise ChronicleError(ErrorCode.UNAUTHENTICATED, "an API key is required")
    namespace = key.namespace
    if namespace.name != namespace_name:
        raise ChronicleError(ErrorCode.NOT_FOUND, f"namespace {namespace_name!r} not found")
    if role not in key.roles:
        raise ChronicleError(ErrorCode.PERMISSION_DENIED, f"this API key lacks the {role!r} role")
    wait = take_token(
        request_bucket(namespace.id),
        rate=namespace.request_rps,
        burst=namespace.request_rps * namespace.request_burst_ratio,
    )
    if wait:
        raise ChronicleError(
            ErrorCode.RATE_LIMITED,
            f"namespace {namespace.name!r} is over its request rate ({namespace.request_rps:g}/s)",
            retry_after=wait,
        )
    return namespace
