"""Payload conversion with Temporal's classes: values ↔ ``Payload`` ↔ the server's JSON payloads.

``DataConverter`` holds a payload converter (``DefaultPayloadConverter``: ``binary/null``,
``binary/plain``, then ``json/plain``) and an optional async ``PayloadCodec``. The converter
turns values into ``Payload`` objects; the codec (encryption, compression) transforms whole
payloads and is applied where payloads cross the wire, in the HTTP transport, so everything
the server stores is what the codec produced.

On the wire a payload is ``{"metadata": {...text}, "data": ...}``: ``json/plain`` data as the
JSON value itself (what the UI shows and the server's own forms send), any other encoding as
base64 text. The default converter writes that form directly, without an intermediate
``Payload``, which keeps the common path as cheap as it was.
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sdk._json_values import from_json_value, to_json_value
from sdk.api.common.v1 import Payload

WirePayload = dict[str, Any]
JSON_ENCODING = "json/plain"
NULL_ENCODING = "binary/null"
BINARY_ENCODING = "binary/plain"


class EncodingPayloadConverter(ABC):
    """Converts values of the kinds it knows to payloads of one ``encoding``."""

    @property
    @abstractmethod
    def encoding(self) -> str: ...

    @abstractmethod
    def to_payload(self, value: Any) -> Payload | None:
        """The payload for ``value``, or None when this converter does not handle it."""

    @abstractmethod
    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any: ...


class BinaryNullPayloadConverter(EncodingPayloadConverter):
    @property
    def encoding(self) -> str:
        return NULL_ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(metadata={"encoding": NULL_ENCODING.encode()}) if value is None else None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        return None


class BinaryPlainPayloadConverter(EncodingPayloadConverter):
    @property
    def encoding(self) -> str:
        return BINARY_ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, bytes):
            return Payload(metadata={"encoding": BINARY_ENCODING.encode()}, data=value)
        return None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        return payload.data


class AdvancedJSONEncoder(json.JSONEncoder):
    """JSON that also takes dataclasses, enums, datetimes, UUIDs and pydantic models."""

    def default(self, o: Any) -> Any:
        return to_json_value(o)


class JSONPlainPayloadConverter(EncodingPayloadConverter):
    """Any JSON-able value as ``json/plain``; a type hint restores dataclasses and the like."""

    def __init__(
        self,
        *,
        encoder: type[json.JSONEncoder] | None = AdvancedJSONEncoder,
        decoder: type[json.JSONDecoder] | None = None,
        encoding: str = JSON_ENCODING,
    ) -> None:
        self._encoder = encoder
        self._decoder = decoder
        self._encoding = encoding

    @property
    def encoding(self) -> str:
        return self._encoding

    def to_payload(self, value: Any) -> Payload | None:
        data = json.dumps(value, cls=self._encoder, separators=(",", ":"), sort_keys=True)
        return Payload(metadata={"encoding": self._encoding.encode()}, data=data.encode())

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        return from_json_value(json.loads(payload.data, cls=self._decoder), type_hint)


class PayloadConverter(ABC):
    """Values ↔ payloads, several at a time (arguments, results)."""

    @abstractmethod
    def to_payloads(self, values: Sequence[Any]) -> list[Payload]: ...

    @abstractmethod
    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[Any] | None = None
    ) -> list[Any]: ...

    def to_payload(self, value: Any) -> Payload:
        return self.to_payloads([value])[0]

    def from_payload(self, payload: Payload, type_hint: Any = None) -> Any:
        return self.from_payloads([payload], [type_hint])[0]


class CompositePayloadConverter(PayloadConverter):
    """Tries each encoding converter in order to encode; decodes by the payload's ``encoding``."""

    def __init__(self, *converters: EncodingPayloadConverter) -> None:
        self.converters = {c.encoding.encode(): c for c in converters}

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        return [self._one_to_payload(value) for value in values]

    def _one_to_payload(self, value: Any) -> Payload:
        for converter in self.converters.values():
            payload = converter.to_payload(value)
            if payload is not None:
                return payload
        raise TypeError(f"value of type {type(value).__name__} has no known converter")

    def from_payloads(self, payloads: Sequence[Payload], type_hints: list[Any] | None = None) -> list[Any]:
        hints = list(type_hints or [])
        values = []
        for index, payload in enumerate(payloads):
            encoding = payload.metadata.get("encoding", JSON_ENCODING.encode())
            converter = self.converters.get(encoding)
            if converter is None:
                raise KeyError(f"unknown payload encoding {encoding.decode()!r}; is a codec missing?")
            values.append(converter.from_payload(payload, hints[index] if index < len(hints) else None))
        return values


class DefaultPayloadConverter(CompositePayloadConverter):
    """Temporal's default chain: None, bytes, then JSON."""

    default_encoding_payload_converters: ClassVar[tuple[EncodingPayloadConverter, ...]] = (
        BinaryNullPayloadConverter(),
        BinaryPlainPayloadConverter(),
        JSONPlainPayloadConverter(),
    )

    def __init__(self) -> None:
        super().__init__(*DefaultPayloadConverter.default_encoding_payload_converters)


class PayloadCodec(ABC):
    """Transforms whole payloads on their way to and from the server (encryption, compression)."""

    @abstractmethod
    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]: ...

    @abstractmethod
    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]: ...


def payload_to_wire(payload: Payload) -> WirePayload:
    """The server's JSON form of a payload (see the module docstring)."""
    metadata = {key: bytes(value).decode() for key, value in payload.metadata.items()}
    if metadata.get("encoding", JSON_ENCODING) == JSON_ENCODING:
        return {"metadata": metadata, "data": json.loads(payload.data) if payload.data else None}
    return {"metadata": metadata, "data": base64.b64encode(payload.data).decode()}


def payload_from_wire(wire: WirePayload) -> Payload:
    metadata = {str(key): str(value).encode() for key, value in (wire.get("metadata") or {}).items()}
    data = wire.get("data")
    if metadata.setdefault("encoding", JSON_ENCODING.encode()) == JSON_ENCODING.encode():
        return Payload(metadata, json.dumps(data, separators=(",", ":")).encode())
    return Payload(metadata, base64.b64decode(data or ""))


@dataclass(frozen=True)
class DataConverter:
    """A payload converter and an optional codec; ``DataConverter.default`` has neither customised.

    Build one with ``DataConverter(payload_codec=MyCodec())`` or
    ``dataclasses.replace(DataConverter.default, payload_converter_class=...)``.
    """

    payload_converter_class: type[PayloadConverter] = DefaultPayloadConverter
    payload_codec: PayloadCodec | None = None
    payload_converter: PayloadConverter = field(init=False, compare=False)

    default: ClassVar[DataConverter]

    def __post_init__(self) -> None:
        object.__setattr__(self, "payload_converter", self.payload_converter_class())

    @property
    def _fast(self) -> bool:
        """The default converter: write the wire form directly."""
        return self.payload_converter_class is DefaultPayloadConverter

    async def encode(self, values: Sequence[Any]) -> list[Payload]:
        """Values to payloads, through the codec (Temporal's ``DataConverter.encode``)."""
        payloads = self.payload_converter.to_payloads(values)
        return await self.payload_codec.encode(payloads) if self.payload_codec else payloads

    async def decode(self, payloads: Sequence[Payload], type_hints: list[Any] | None = None) -> list[Any]:
        if self.payload_codec:
            payloads = await self.payload_codec.decode(payloads)
        return self.payload_converter.from_payloads(payloads, type_hints)

    # -- the wire form, before the codec (the transport applies it) ----------------------------

    def to_payload(self, value: Any) -> WirePayload:
        if not self._fast:
            return payload_to_wire(self.payload_converter.to_payload(value))
        if value is None:
            return {"metadata": {"encoding": NULL_ENCODING}, "data": ""}
        if isinstance(value, bytes):
            return {"metadata": {"encoding": BINARY_ENCODING}, "data": base64.b64encode(value).decode()}
        return {"metadata": {"encoding": JSON_ENCODING}, "data": to_json_value(value)}

    def from_payload(self, payload: WirePayload | None, hint: Any = None) -> Any:
        if payload is None:
            return None
        if not self._fast:
            return self.payload_converter.from_payload(payload_from_wire(payload), hint)
        encoding = (payload.get("metadata") or {}).get("encoding", JSON_ENCODING)
        if encoding == JSON_ENCODING:
            return from_json_value(payload.get("data"), hint)
        if encoding == NULL_ENCODING:
            return None
        if encoding == BINARY_ENCODING:
            return base64.b64decode(payload.get("data") or "")
        raise ValueError(f"unknown payload encoding {encoding!r}; is a codec missing?")

    def to_payloads(self, values: Sequence[Any]) -> list[WirePayload]:
        return [self.to_payload(v) for v in values]

    def from_payloads(
        self, payloads: Sequence[WirePayload] | None, hints: Sequence[Any] | None = None
    ) -> list[Any]:
        hints = list(hints or [])
        return [
            self.from_payload(payload, hints[index] if index < len(hints) else None)
            for index, payload in enumerate(payloads or [])
        ]

    def to_result(self, value: Any) -> list[WirePayload] | None:
        """A single result travels as an array of one payload, or null for None."""
        return None if value is None else [self.to_payload(value)]

    def from_result(self, payloads: Sequence[WirePayload] | None, hint: Any = None) -> Any:
        return self.from_payload(payloads[0], hint) if payloads else None


DataConverter.default = DataConverter()
default_converter = DataConverter.default


def default() -> DataConverter:
    """The default data converter (Temporal's ``converter.default()``)."""
    return DataConverter.default


def parameter_hints(fn: Callable[..., Any], *, skip_self: bool = False) -> list[Any]:
    """The declared types of ``fn``'s positional parameters, for decoding its arguments.

    Worked out once per function (``typing.get_type_hints`` and ``inspect.signature`` took
    a tenth of a worker's CPU when every workflow start and activity task asked again); a
    bound method is looked up by its function, so no instance is kept alive by the cache."""
    if inspect.ismethod(fn):
        fn, skip_self = fn.__func__, True
    try:
        return list(_parameter_hints(fn, skip_self))
    except TypeError:  # an unhashable callable: not cached
        return list(_parameter_hints.__wrapped__(fn, skip_self))


@functools.lru_cache(maxsize=1024)
def _parameter_hints(fn: Callable[..., Any], skip_self: bool) -> tuple[Any, ...]:
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):
        hints = {}
    params = list(inspect.signature(fn).parameters.values())
    if skip_self and params:
        params = params[1:]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(hints.get(p.name) for p in params if p.kind in positional)


def return_hint(fn: Callable[..., Any]) -> Any:
    """The declared return type of ``fn``, if any (worked out once per function)."""
    if inspect.ismethod(fn):
        fn = fn.__func__
    try:
        return _return_hint(fn)
    except TypeError:  # an unhashable callable: not cached
        return _return_hint.__wrapped__(fn)


@functools.lru_cache(maxsize=1024)
def _return_hint(fn: Callable[..., Any]) -> Any:
    try:
        return typing.get_type_hints(fn).get("return")
    except (NameError, TypeError):
        return None


__all__ = [
    "AdvancedJSONEncoder",
    "BinaryNullPayloadConverter",
    "BinaryPlainPayloadConverter",
    "CompositePayloadConverter",
    "DataConverter",
    "DefaultPayloadConverter",
    "EncodingPayloadConverter",
    "JSONPlainPayloadConverter",
    "Payload",
    "PayloadCodec",
    "PayloadConverter",
    "default",
]
