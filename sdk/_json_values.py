"""Python values ↔ plain JSON values, and back again as the declared type hint describes.

Dataclasses travel as their fields, enums as their values, datetimes as ISO 8601 text,
timedeltas as seconds, UUIDs as text and pydantic models as their JSON dump; on the way back a
type hint, when known, restores them, so parameters arrive as the types their signatures
declare.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any


def to_json_value(value: Any) -> Any:
    """Turn dataclasses, enums, datetimes, UUIDs, pydantic models and tuples into plain JSON values."""
    if value is None or (isinstance(value, str | int | float | bool) and not isinstance(value, enum.Enum)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_json_value(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json_value(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # a pydantic model
        return dump(mode="json")
    raise TypeError(f"value of type {type(value).__name__} is not JSON-serializable")


def from_json_value(value: Any, hint: Any) -> Any:
    """Rebuild ``value`` as ``hint`` describes; unknown hints leave it as decoded JSON."""
    if hint is None or hint is Any or value is None or hint is inspect.Parameter.empty:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _first_fitting(value, args)
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


def _first_fitting(value: Any, options: tuple[Any, ...]) -> Any:
    for option in options:
        if option is type(None):
            continue
        try:
            return from_json_value(value, option)
        except (TypeError, ValueError, KeyError):
            continue
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
    if cls is uuid.UUID:
        return uuid.UUID(str(value))
    if cls is float and isinstance(value, int):
        return float(value)
    validate = getattr(cls, "model_validate", None)
    if callable(validate) and not isinstance(value, cls):  # a pydantic model
        return validate(value)
    return value
