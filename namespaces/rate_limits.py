"""Token buckets in PostgreSQL, so a limit holds across every frontend process.

One statement refills and takes a token atomically; it runs in autocommit (outside
any kernel transaction) so the bucket row is locked only for that statement.
"""

from __future__ import annotations

from django.db import connection

_TAKE = """
INSERT INTO namespaces_ratebucket (key, tokens, updated_at, granted, throttled_count)
VALUES (%(key)s, %(burst)s - 1, clock_timestamp(), true, 0)
ON CONFLICT (key) DO UPDATE SET
  granted = ({refill}) >= 1,
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
    return max(0.001, (1.0 - float(tokens)) / rate)
