"""Typed access to Chronicle's ``CHRONICLE_*`` settings.

Engine code calls :func:`engine_settings` when it needs a value, never at import time,
so tests can override settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class EngineSettings:
    shards: int
    poll_timeout_seconds: float
    history_wait_seconds: float
    safety_recheck_seconds: float
    shard_lease_seconds: float
    sticky_timeout_seconds: float
    query_timeout_seconds: float


def engine_settings() -> EngineSettings:
    return EngineSettings(
        shards=settings.CHRONICLE_SHARDS,
        poll_timeout_seconds=settings.CHRONICLE_POLL_TIMEOUT_SECONDS,
        history_wait_seconds=settings.CHRONICLE_HISTORY_WAIT_SECONDS,
        safety_recheck_seconds=settings.CHRONICLE_SAFETY_RECHECK_SECONDS,
        shard_lease_seconds=settings.CHRONICLE_SHARD_LEASE_SECONDS,
        sticky_timeout_seconds=settings.CHRONICLE_STICKY_TIMEOUT_SECONDS,
        query_timeout_seconds=settings.CHRONICLE_QUERY_TIMEOUT_SECONDS,
    )
