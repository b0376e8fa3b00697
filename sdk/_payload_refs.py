"""Resolving payload references: events name large payloads by digest; fetch them on demand.

The server keeps payloads past a namespace's inline limit out of events and puts
``{"metadata", "payload_ref": {"sha256", "size_bytes"}}`` in their place. Before
events reach replay, ``result()`` or ``fetch_history()``, every reference is swapped
for the full payload, fetched once per digest and kept in a small LRU cache (a
worker replaying the same run, or many runs sent the same value, asks once).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

PAYLOAD_REF = "payload_ref"
CACHE_ENTRIES = 256
CACHE_BYTES = 64 * 1024 * 1024


class _Getter(Protocol):
    async def get(self, path: str, **options: Any) -> dict[str, Any] | None: ...


def _is_ref(value: Any) -> bool:
    return isinstance(value, dict) and PAYLOAD_REF in value and isinstance(value.get("metadata"), dict)


def _digests(value: Any, found: set[str]) -> None:
    if _is_ref(value):
        found.add(str(value[PAYLOAD_REF]["sha256"]))
    elif isinstance(value, dict):
        for v in value.values():
            _digests(v, found)
    elif isinstance(value, list):
        for v in value:
            _digests(v, found)


def _replace(value: Any, payloads: dict[str, Any]) -> Any:
    if _is_ref(value):
        return payloads[str(value[PAYLOAD_REF]["sha256"])]
    if isinstance(value, dict):
        return {k: _replace(v, payloads) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, payloads) for v in value]
    return value


class PayloadRefResolver:
    """Swaps payload references in events for the stored payloads, with an LRU cache."""

    def __init__(
        self, transport: _Getter, *, max_entries: int = CACHE_ENTRIES, max_bytes: int = CACHE_BYTES
    ) -> None:
        self.transport = transport
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._cache: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._cached_bytes = 0
        self.fetches = 0

    async def resolve(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``events`` with every payload reference replaced; the same list when there are none."""
        digests: set[str] = set()
        _digests(events, digests)
        if not digests:
            return events
        payloads = {digest: await self.payload(digest) for digest in sorted(digests)}
        return [_replace(event, payloads) for event in events]

    async def payload(self, digest: str) -> Any:
        """The full payload for ``digest``, from the cache or the server."""
        hit = self._cache.get(digest)
        if hit is not None:
            self._cache.move_to_end(digest)
            return hit[0]
        body = await self.transport.get(f"/payloads/{digest}") or {}
        self.fetches += 1
        self._remember(digest, body["payload"], int(body.get("size_bytes") or 0))
        return body["payload"]

    def _remember(self, digest: str, payload: Any, size: int) -> None:
        if size > self.max_bytes:
            return
        self._cache[digest] = (payload, size)
        self._cached_bytes += size
        while len(self._cache) > self.max_entries or self._cached_bytes > self.max_bytes:
            _, (_, dropped) = self._cache.popitem(last=False)
            self._cached_bytes -= dropped
