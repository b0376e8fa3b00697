"""Token buckets in PostgreSQL, so a limit holds across every frontend process.

One statement refills and takes a token atomically; it runs in autocommit (outside
any kernel transaction) so the bucket row is locked only for that statement. The table is
unlogged (migration 0008), so that commit does not wait for a WAL flush; after a crash
every bucket starts full.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from chronicle import metrics

_TAKE = """
INSERT INTO namespaces_ratebucket (key, tokens, updated_at, granted, throttled_count, granted_count)
VALUES (%(key)s, %(burst)s - 1, clock_timestamp(), true, 0, 1)
ON CONFLICT (key) DO UPDATE SET
  granted = ({refill}) >= 1,
  granted_count = namespaces_ratebucket.granted_count + CASE WHEN ({refill}) >= 1 THEN 1 ELSE 0 END,
  throttled_count = namespaces_ratebucket.throttled_count + CASE WHEN ({refill}) >= 1 THEN 0 ELSE 1 END,
  tokens = CASE WHEN ({refill}) >= 1 THEN ({refill}) - 1 ELSE ({refill}) END,
  updated_at = clock_timestamp()
RETURNING granted, tokens
"""
_REFILL = (
    "LEAST(%(burst)s, namespaces_ratebucket.tokens + %(rate)s * "
    "EXTRACT(EPOCH FROM clock_timestamp() - namespaces_ratebucket.updated_at))"
)
_SQL = _TAKE.format(refill=_REFILL)


def take_token(key: str, *, rate: float, burst: float) -> float:
    """Take one token; return 0 when granted, else the seconds until one is free."""
    if rate <= 0:
        return 0.0
    burst = max(1.0, burst)
    with connection.cursor() as cursor:
        cursor.execute(_SQL, {"key": key, "rate": rate, "burst": burst})
        granted, tokens = cursor.fetchone()
    if granted:
        return 0.0
    metrics.rate_limit_refused(key)
    return max(0.001, (1.0 - float(tokens)) / rate)


def bucket_counts(keys: list[str]) -> dict[str, tuple[int, int]]:
    """``{key: (granted, throttled)}`` since each bucket was created, for the buckets in use.

    Two readings a few seconds apart give the live rate; the UI takes them as it refreshes.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, granted_count, throttled_count FROM namespaces_ratebucket WHERE key = ANY(%s)",
            [keys],
        )
        return {key: (int(granted), int(throttled)) for key, granted, throttled in cursor.fetchall()}


def request_bucket_key(namespace_id: object) -> str:
    """The bucket every API request of the namespace takes a token from."""
    return f"rps:{namespace_id}"


def dispatch_bucket_key(namespace_id: object, task_queue: str = "") -> str:
    """The bucket of a namespace's dispatch limit, or of one queue's when ``task_queue`` is given."""
    return f"dispatch:{namespace_id}:{task_queue}" if task_queue else f"dispatch:{namespace_id}"


@dataclass(frozen=True)
class LimitInForce:
    """The dispatch rate a queue is held to, and which setting sets it.

    Matching takes a token from the namespace's bucket (shared by all its queues) and
    then from the queue's own, so the tighter of the two non-zero limits is the ceiling.
    """

    rps: float  # 0 = unlimited
    source: str  # QUEUE_LIMIT, NAMESPACE_LIMIT or UNLIMITED
    queue_rps: float
    namespace_rps: float


QUEUE_LIMIT = "task queue limit"
NAMESPACE_LIMIT = "namespace limit (shared by all its queues)"
UNLIMITED = "no limit"


def dispatch_limit_in_force(namespace_rps: float, queue_rps: float) -> LimitInForce:
    """The effective dispatch ceiling of a queue from its own limit and the namespace's (0 = none)."""
    if queue_rps > 0 and (namespace_rps <= 0 or queue_rps <= namespace_rps):
        return LimitInForce(queue_rps, QUEUE_LIMIT, queue_rps, namespace_rps)
    if namespace_rps > 0:
        return LimitInForce(namespace_rps, NAMESPACE_LIMIT, queue_rps, namespace_rps)
    return LimitInForce(0.0, UNLIMITED, queue_rps, namespace_rps)
