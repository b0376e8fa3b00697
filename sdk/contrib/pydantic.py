"""``pydantic_data_converter``: pydantic models as workflow and activity arguments and results.

Needs pydantic (v2), which the SDK does not depend on: install it beside your code. The
default converter already sends a model as its JSON dump and rebuilds it from a type hint;
this one lets pydantic do both (``TypeAdapter``), so every type pydantic validates works.
"""

from __future__ import annotations

import dataclasses
from typing import Any

try:
    from pydantic import TypeAdapter
    from pydantic_core import to_json
except ImportError as missing:  # pragma: no cover - depends on the environment
    raise ImportError(
        "sdk.contrib.pydantic needs pydantic v2, which the SDK does not install: "
        "install pydantic beside your code (or drop data_converter=pydantic_data_converter; "
        "the default converter sends pydantic models as their JSON dump too)"
    ) from missing

from sdk.api.common.v1 import Payload
from sdk.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)


class PydanticJSONPlainPayloadConverter(JSONPlainPayloadConverter):
    """``json/plain`` through pydantic: ``to_json`` out, ``TypeAdapter(hint)`` in."""

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(metadata={"encoding": self.encoding.encode()}, data=to_json(value))

    def from_payload(self, payload: Payload, type_hint: Any = None) -> Any:
        return TypeAdapter(Any if type_hint is None else type_hint).validate_json(payload.data)


class PydanticPayloadConverter(CompositePayloadConverter):
    """The default chain with pydantic's JSON in place of the plain one."""

    def __init__(self) -> None:
        super().__init__(
            *(
                PydanticJSONPlainPayloadConverter() if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


pydantic_data_converter = dataclasses.replace(
    DataConverter.default, payload_converter_class=PydanticPayloadConverter
)

__all__ = ["PydanticJSONPlainPayloadConverter", "PydanticPayloadConverter", "pydantic_data_converter"]
