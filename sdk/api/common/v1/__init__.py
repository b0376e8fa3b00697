"""``Payload``: one encoded value, the type payload converters and codecs are written against.

It mirrors Temporal's protobuf message (``metadata: dict[str, bytes]``, ``data: bytes``) with
the few protobuf methods codecs call: ``SerializeToString`` and ``FromString`` use the
protobuf wire format itself, so an encryption or compression codec written for Temporal wraps
and unwraps payloads byte for byte as it did there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

_LEN = 2  # protobuf wire type "length-delimited"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | _LEN) + _varint(len(data)) + data


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated protobuf varint")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def _fields(buf: bytes) -> Iterable[tuple[int, bytes]]:
    """The length-delimited fields of a message; other wire types are refused (Payload has none)."""
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        if key & 7 != _LEN:
            raise ValueError(f"unexpected protobuf wire type {key & 7} in Payload")
        size, pos = _read_varint(buf, pos)
        if pos + size > len(buf):
            raise ValueError("truncated protobuf field")
        yield key >> 3, buf[pos : pos + size]
        pos += size


@dataclass
class Payload:
    """One encoded value: ``metadata`` (``encoding`` names the format) and the ``data`` bytes."""

    metadata: dict[str, bytes] = field(default_factory=dict)
    data: bytes = b""

    def __post_init__(self) -> None:
        self.metadata = dict(self.metadata)

    def SerializeToString(self, deterministic: bool = True) -> bytes:
        """The protobuf encoding (``map<string, bytes> metadata = 1; bytes data = 2``)."""
        out = bytearray()
        for key in sorted(self.metadata) if deterministic else self.metadata:
            entry = _field(1, key.encode()) + _field(2, bytes(self.metadata[key]))
            out += _field(1, entry)
        if self.data:
            out += _field(2, bytes(self.data))
        return bytes(out)

    @classmethod
    def FromString(cls, serialized: bytes) -> Payload:
        payload = cls()
        payload.ParseFromString(serialized)
        return payload

    def ParseFromString(self, serialized: bytes) -> int:
        """Replace this payload's contents with the decoded message; returns the bytes read."""
        metadata: dict[str, bytes] = {}
        data = b""
        for number, chunk in _fields(bytes(serialized)):
            if number == 1:
                entry = dict(_fields(chunk))
                metadata[entry.get(1, b"").decode()] = entry.get(2, b"")
            elif number == 2:
                data = chunk
        self.metadata, self.data = metadata, data
        return len(serialized)

    def CopyFrom(self, other: Payload) -> None:
        self.metadata, self.data = dict(other.metadata), other.data

    def ByteSize(self) -> int:
        return len(self.SerializeToString())


@dataclass
class Payloads:
    """A list of payloads (Temporal's ``Payloads`` message)."""

    payloads: list[Payload] = field(default_factory=list)

    def __init__(self, payloads: Iterable[Payload] = ()) -> None:
        self.payloads = list(payloads)


__all__ = ["Payload", "Payloads"]
