"""The converter family with Temporal's names: payloads, composite converters, codecs on the wire."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from sdk import converter
from sdk._http import HttpTransport
from sdk._wire_codec import apply_codec
from sdk.api.common.v1 import Payload
from sdk.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    JSONPlainPayloadConverter,
    PayloadCodec,
)


@dataclass
class Point:
    x: int
    y: int


class ZlibCodec(PayloadCodec):
    """A compression codec as Temporal's samples write one: the whole payload, serialized."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": b"binary/zlib"}, data=zlib.compress(p.SerializeToString()))
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding", b"").decode() != "binary/zlib":
                out.append(p)
                continue
            out.append(Payload.FromString(zlib.decompress(p.data)))
        return out


def test_payload_serializes_as_protobuf_does() -> None:
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"hi"')
    # The bytes protobuf writes for this message (map entry field 1, data field 2).
    expected = b"\n\x16\n\x08encoding\x12\njson/plain" + b'\x12\x04"hi"'
    assert payload.SerializeToString() == expected
    assert Payload.FromString(expected) == payload
    with pytest.raises(ValueError):
        Payload.FromString(b"\x08\x01")


def test_default_converter_chain_matches_temporal() -> None:
    default = converter.default().payload_converter
    assert isinstance(default, DefaultPayloadConverter)
    none, raw, point = default.to_payloads([None, b"\x00\x01", Point(1, 2)])
    assert none.metadata == {"encoding": b"binary/null"} and none.data == b""
    assert raw.metadata == {"encoding": b"binary/plain"} and raw.data == b"\x00\x01"
    assert point.metadata == {"encoding": b"json/plain"} and json.loads(point.data) == {"x": 1, "y": 2}
    assert default.from_payloads([none, raw, point], [None, bytes, Point]) == [None, b"\x00\x01", Point(1, 2)]


def test_wire_form_is_the_same_with_and_without_the_fast_path() -> None:
    class Slow(CompositePayloadConverter):
        def __init__(self) -> None:
            super().__init__(*DefaultPayloadConverter.default_encoding_payload_converters)

    slow = DataConverter(payload_converter_class=Slow)
    for value in [None, b"ab", {"a": [1, 2]}, Point(3, 4), "text"]:
        assert slow.to_payload(value) == DataConverter.default.to_payload(value)
        wire = DataConverter.default.to_payload(value)
        hint = Point if isinstance(value, Point) else None
        assert slow.from_payload(wire, hint) == DataConverter.default.from_payload(wire, hint) == value


class UpperJSON(EncodingPayloadConverter):
    """A custom encoding, plugged in ahead of JSON as Temporal users do."""

    @property
    def encoding(self) -> str:
        return "text/upper"

    def to_payload(self, value: Any) -> Payload | None:
        return (
            Payload({"encoding": b"text/upper"}, value.upper().encode()) if isinstance(value, str) else None
        )

    def from_payload(self, payload: Payload, type_hint: Any = None) -> Any:
        return payload.data.decode().lower()


class UpperConverter(CompositePayloadConverter):
    def __init__(self) -> None:
        super().__init__(UpperJSON(), JSONPlainPayloadConverter())


def test_custom_composite_converter_travels_as_base64_on_the_wire() -> None:
    custom = dataclasses.replace(DataConverter.default, payload_converter_class=UpperConverter)
    wire = custom.to_payload("hello")
    assert wire == {"metadata": {"encoding": "text/upper"}, "data": "SEVMTE8="}
    assert custom.from_payload(wire) == "hello"
    assert custom.from_payload(custom.to_payload([1])) == [1]
    with pytest.raises(KeyError, match="unknown payload encoding"):
        custom.from_payload({"metadata": {"encoding": "binary/other"}, "data": ""})


def test_data_converter_encode_and_decode_apply_the_codec() -> None:
    data_converter = DataConverter(payload_codec=ZlibCodec())
    [encoded] = asyncio.run(data_converter.encode([Point(1, 2)]))
    assert encoded.metadata["encoding"] == b"binary/zlib"
    assert asyncio.run(data_converter.decode([encoded], [Point])) == [Point(1, 2)]


def test_codec_rewrites_every_payload_in_a_body_and_back() -> None:
    body = {
        "input": [DataConverter.default.to_payload({"secret": "s3"})],
        "nested": {"failure": {"details": [DataConverter.default.to_payload(7)]}},
        "not_a_payload": {"metadata": "x"},
    }
    encoded = asyncio.run(apply_codec(body, ZlibCodec(), encode=True))
    assert "s3" not in json.dumps(encoded)
    assert encoded["input"][0]["metadata"] == {"encoding": "binary/zlib"}
    assert encoded["not_a_payload"] == {"metadata": "x"}
    assert asyncio.run(apply_codec(encoded, ZlibCodec(), encode=False)) == body


def test_transport_sends_encoded_payloads_and_decodes_answers() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        seen.append(sent)
        return httpx.Response(200, json={"echo": sent["input"]})

    async def call() -> Any:
        transport = HttpTransport("http://server", "ns", None)
        transport._client = httpx.AsyncClient(
            base_url="http://server", transport=httpx.MockTransport(handler)
        )
        transport.payload_codec = ZlibCodec()
        return await transport.post("/x", {"input": [DataConverter.default.to_payload("plain")]})

    answer = asyncio.run(call())
    assert seen[0]["input"][0]["metadata"]["encoding"] == "binary/zlib"
    assert "plain" not in json.dumps(seen[0])
    assert answer == {"echo": [DataConverter.default.to_payload("plain")]}
