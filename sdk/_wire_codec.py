"""Applies a ``PayloadCodec`` to every payload in a request body or an answer, as they cross the wire.

The HTTP transport calls this once per call, so whatever a client or worker sends (inputs,
results, failures' details, memos, heartbeats, markers) is stored as the codec produced it,
and whatever comes back is decoded before any SDK code reads it. A payload is recognised by
its shape, ``{"metadata": {...}, "data": ...}`` (the server's rule too); its data is never
searched further, and all of one call's payloads go to the codec in one batch.
"""

from __future__ import annotations

from typing import Any

from sdk.converter import PayloadCodec, payload_from_wire, payload_to_wire


def is_wire_payload(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("metadata"), dict) and "data" in value


def _collect(value: Any, found: list[dict[str, Any]]) -> None:
    if isinstance(value, dict):
        if is_wire_payload(value):
            found.append(value)
            return
        for item in value.values():
            _collect(item, found)
    elif isinstance(value, list):
        for item in value:
            _collect(item, found)


def _swap(value: Any, swaps: dict[int, dict[str, Any]]) -> Any:
    if isinstance(value, dict):
        if id(value) in swaps:
            return swaps[id(value)]
        return {key: _swap(item, swaps) for key, item in value.items()}
    if isinstance(value, list):
        return [_swap(item, swaps) for item in value]
    return value


async def apply_codec(value: Any, codec: PayloadCodec, *, encode: bool) -> Any:
    """``value`` with each payload encoded (or decoded) by ``codec``; unchanged when it has none."""
    found: list[dict[str, Any]] = []
    _collect(value, found)
    if not found:
        return value
    payloads = [payload_from_wire(wire) for wire in found]
    coded = await (codec.encode(payloads) if encode else codec.decode(payloads))
    if len(coded) != len(found):
        raise ValueError(f"the payload codec returned {len(coded)} payloads for {len(found)}")
    swaps = {id(wire): payload_to_wire(payload) for wire, payload in zip(found, coded, strict=True)}
    return _swap(value, swaps)
