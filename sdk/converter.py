"""Payload conversion: Python values ↔ ``{"metadata", "data"}`` JSON payloads, with a codec hook.

Values are encoded as plain JSON (dataclasses as their fields); on decode a type hint, when known,
restores dataclasses, enums, datetimes and containers of them, so workflow and activity parameters
arrive as the types their signatures declare.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import typing
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

Payload = dict[str, Any]
JSON_ENCODING = "json/plain"


class PayloadCodec:
    """Transforms whole payloads (encryption, compression); the identity by default."""

    def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


def to_json_value(value: Any) -> Any:
    """Turn dataclasses, enums, datetimes and tuples into plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_json_value(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json_value(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"value of type {type(value).__name__} is not JSON-serializable")


def from_json_value(value: Any, hint: Any) -> Any:
    """Rebuild ``value`` as ``hint`` describes; unknown hints leave it as decoded JSON."""
    if hint is None or hint is Any or value is None or hint is inspect.Parameter.empty:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        for option in args:
            if option is type(None):
                continue
            try:
                return from_json_value(value, option)
            except (TypeError, ValueError, KeyError):
                continue
        return value
    if origin in (list, Sequence, set, frozenset) and args:
        items = [from_json_value(v, args[0]) for v in value]
        return origin(items) if origin in (set, frozenset) else items
    if origin is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json_value(v, args[0]) for v in value)
        return tuple(from_json_value(v, h) for v, h in zip(value, args, strict=False))
    if origin is dict and len(args) == 2:
        return {k: from_json_value(v, args[1]) for k, v in value.items()}
    if isinstance(hint, type):
        return _from_json_class(value, hint)
    return value


def _from_json_class(value: Any, cls: type) -> Any:
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: from_json_value(v, hints.get(k)) for k, v in value.items() if k in known}
        return cls(**kwargs)
    if issubclass(cls, enum.Enum):
        return cls(value)
    if cls is datetime:
        return datetime.fromisoformat(value)
    if cls is timedelta:
        return timedelta(seconds=float(value))
    if cls is float and isinstance(value, int):
        return float(value)
    return value


class DataConverter:
    """Encodes values to payloads (then through the codec) and back."""

    def __init__(self, payload_codec: PayloadCodec | None = None) -> None:
        self.payload_codec = payload_codec

    def to_payload(self, value: Any) -> Payload:
        payload: Payload = {"metadata": {"encoding": JSON_ENCODING}, "data": to_json_value(value)}
        return self.encode_payloads([payload])[0]

    def from_payload(self, payload: Payload | None, hint: Any = None) -> Any:
        if payload is None:
            return None
        decoded = self.decode_payloads([payload])[0]
        encoding = decoded.get("metadata", {}).get("encoding", JSON_ENCODING)
        if encoding != JSON_ENCODING:
            raise ValueError(f"unknown payload encoding {encoding!r}; is a codec missing?")
        return from_json_value(decoded.get("data"), hint)

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        return [self.to_payload(v) for v in values]

    def from_payloads(
        self, payloads: Sequence[Payload] | None, hints: Sequence[Any] | None = None
    ) -> list[Any]:
        hints = list(hints or [])
        result = []
        for index, payload in enumerate(payloads or []):
            hint = hints[index] if index < len(hints) else None
            result.append(self.from_payload(payload, hint))
        return result

    def to_result(self, value: Any) -> list[Payload] | None:
        """A single result travels as an array of one payload, or null for None."""
        return None if value is None else [self.to_payload(value)]

    def from_result(self, payloads: Sequence[Payload] | None, hint: Any = None) -> Any:
        return self.from_payload(payloads[0], hint) if payloads else None

    def encode_payloads(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.payload_codec.encode(payloads) if self.payload_codec else list(payloads)

    def decode_payloads(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.payload_codec.decode(payloads) if self.payload_codec else list(payloads)


def parameter_hints(fn: Callable[..., Any], *, skip_self: bool = False) -> list[Any]:
    """The declared types of ``fn``'s positional parameters, for decoding its arguments."""
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):
        hints = {}
    params = list(inspect.signature(fn).parameters.values())
    if skip_self and params:
        params = params[1:]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [hints.get(p.name) for p in params if p.kind in positional]


def return_hint(fn: Callable[..., Any]) -> Any:
    try:
        return typing.get_type_hints(fn).get("return")
    except (NameError, TypeError):
        return None


default_converter = DataConverter()
