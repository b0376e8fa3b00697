"""API-key authentication and the single tenancy gate for every API call.

``access_namespace`` fetches the namespace named in the URL *and* checks the caller's
key belongs to it with the needed role. A key of another namespace gets 404 (names do
not leak); a key of this namespace without the role gets 403.

A frontend process keeps each key it resolved (with its namespace) for
``CHRONICLE_API_KEY_CACHE_SECONDS`` (default 5): the lookup was about a fifth of a
small call's CPU. The bound: a key revoked, or a namespace changed, in another process
(or by a bulk ``UPDATE``) is honoured by this process within that many seconds. Saves
and deletes through the ORM in this process drop the cache at once. A key with an
``expires_at`` (a rotated key's grace period) is cached no longer than it has left to
live, so it is refused from its expiry on, like a revoked key.
"""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from chronicle.errors import ChronicleError, ErrorCode
from namespaces.models import ApiKey, Namespace
from namespaces.rate_limits import request_bucket_key, take_token

_LAST_USED_GRANULARITY = timedelta(seconds=60)
# Hash of a key -> (monotonic expiry, the key with its namespace). Plain dict operations
# are atomic, so the request threads share it without a lock.
_resolved_keys: dict[str, tuple[float, ApiKey]] = {}
_RESOLVED_KEYS_MAX = 10_000


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def api_key_from_header(header: str | None) -> ApiKey:
    """Resolve ``Bearer <key>`` to a live key or raise 401."""
    if not header or not header.startswith("Bearer "):
        raise ChronicleError(ErrorCode.UNAUTHENTICATED, "send Authorization: Bearer <api key>")
    key = _resolve(hash_key(header[len("Bearer ") :].strip()))
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > _LAST_USED_GRANULARITY:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def _resolve(key_hash: str) -> ApiKey:
    """The live key with this hash, from this process's cache while it is fresh."""
    now = time.monotonic()
    cached = _resolved_keys.get(key_hash)
    if cached is not None and cached[0] > now:
        return cached[1]
    live = ApiKey.objects.select_related("namespace").filter(revoked_at__isnull=True)
    key = live.filter(key_hash=key_hash).first()
    # An expiring key stays cached no longer than it lives: the hit above needs no clock read.
    ttl = float(settings.CHRONICLE_API_KEY_CACHE_SECONDS)
    if key is not None and key.expires_at is not None:
        ttl = min(ttl, (key.expires_at - timezone.now()).total_seconds())
        if ttl <= 0:
            key = None
    if key is None:
        _resolved_keys.pop(key_hash, None)
        raise ChronicleError(ErrorCode.UNAUTHENTICATED, "unknown, revoked or expired API key")
    if ttl > 0:
        if len(_resolved_keys) >= _RESOLVED_KEYS_MAX:
            _resolved_keys.clear()
        _resolved_keys[key_hash] = (now + ttl, key)
    return key


def forget_resolved_keys(**_: object) -> None:
    """Drop this process's resolved keys (a key or namespace changed); a signal receiver."""
    _resolved_keys.clear()


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
        request_bucket_key(namespace.id),
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
