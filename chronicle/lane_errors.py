"""Field errors for a body that does not fit its struct, in the DRF serializers' words.

msgspec stops at a body's first fault and words it its own way; callers of the API have
always had every faulty field, each with DRF's message. So on the (rare)
failing path, each field's value is checked against what its struct declares
(``msgspec.inspect``), and the messages are DRF's: one description of a body, and the
same 400 as before for the same mistake.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from msgspec import inspect as mi

from chronicle.errors import UNKNOWN_FIELD

REQUIRED = "This field is required."
NULL = "This field may not be null."
BLANK = "This field may not be blank."

Errors = list[str] | dict[str, Any]


@dataclass(frozen=True)
class _Rules:
    """What a struct says of its fields beyond their types (class attributes of the struct):
    ``json_fields`` hold any JSON, absent means None and an explicit null is refused (DRF's
    ``JSONField``); ``blank_allowed`` text may be empty once trimmed (``allow_blank=True``).
    ``strict``: a value must be of its field's JSON type (a JSON body), not text read as it
    (a query string)."""

    json_fields: frozenset[str]
    blank_allowed: frozenset[str]
    strict: bool

    @staticmethod
    def of(struct: type[Any], strict: bool) -> _Rules:
        return _Rules(
            getattr(struct, "json_fields", frozenset()),
            getattr(struct, "blank_allowed", frozenset()),
            strict,
        )


def field_errors(
    struct: type[msgspec.Struct], body: dict[str, Any], *, strict: bool = False
) -> dict[str, Any]:
    """Every faulty field of ``body`` against ``struct``: ``{field: [message]}`` (or, for a
    nested body, ``{field: {subfield: [message]}}``), judged as :func:`chronicle.lane.convert`
    judged it (``strict`` for a JSON body)."""
    info = mi.type_info(struct)
    assert isinstance(info, mi.StructType)
    errors = _struct_errors(info, body, strict)
    return errors or {"non_field_errors": ["Invalid data."]}


def _struct_errors(info: mi.StructType, body: dict[str, Any], strict: bool) -> dict[str, Any]:
    errors: dict[str, Any] = {}
    rules = _Rules.of(info.cls, strict)
    for field in info.fields:
        if field.encode_name not in body:
            if field.required:
                errors[field.encode_name] = [REQUIRED]
            continue
        problem = _value_errors(rules, field.name, field.type, body[field.encode_name], top=True)
        if problem:
            errors[field.encode_name] = problem
    if info.forbid_unknown_fields:
        known = {field.encode_name for field in info.fields}
        errors.update({name: [UNKNOWN_FIELD] for name in body if name not in known})
    return errors


def _value_errors(rules: _Rules, name: str, kind: mi.Type, value: Any, *, top: bool = False) -> Errors | None:
    """What is wrong with one field's ``value`` (or, not ``top``, an item of it), or None."""
    if isinstance(kind, mi.Metadata):  # a described type: the type under the description
        kind = kind.type
    if isinstance(kind, mi.AnyType):  # any JSON; a JSON field itself refuses null
        return [NULL] if value is None and top and name in rules.json_fields else None
    if isinstance(kind, mi.UnionType):
        if value is None and any(isinstance(t, mi.NoneType) for t in kind.types):
            return None
        kind = next(t for t in kind.types if not isinstance(t, mi.NoneType))
        if isinstance(kind, mi.Metadata):
            kind = kind.type
    if value is None:
        return [NULL]
    if isinstance(kind, mi.StrType):
        return _text_errors(rules, name, kind, value)
    if isinstance(kind, mi.FloatType):
        return _number_errors(kind, value, rules.strict)
    if isinstance(kind, mi.IntType):
        return _integer_errors(kind, value, rules.strict)
    if isinstance(kind, mi.LiteralType):
        return None if value in kind.values else [f'"{value}" is not a valid choice.']
    if isinstance(kind, mi.UUIDType):
        return None if _convertible(value, uuid.UUID) else ["Must be a valid UUID."]
    if isinstance(kind, mi.BoolType):
        return None if _convertible(value, bool, rules.strict) else ["Must be a valid boolean."]
    if isinstance(kind, mi.ListType):
        return _list_errors(rules, name, kind, value)
    if isinstance(kind, mi.DictType):
        return _dict_errors(rules, name, kind, value)
    if isinstance(kind, mi.StructType):
        return _nested_errors(kind, value, rules.strict)
    if isinstance(kind, mi.DateTimeType):
        return _datetime_errors(kind, value)
    return None


def _datetime_errors(kind: mi.DateTimeType, value: Any) -> Errors | None:
    """A date and time in ISO 8601, with its offset where the field asks for one."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and (not kind.tz or parsed.tzinfo is not None):
            return None
    offset = " with its UTC offset" if kind.tz else ""
    return [f"Datetime has wrong format. Use an ISO 8601 date and time{offset}."]


def _text_errors(rules: _Rules, name: str, kind: mi.StrType, value: Any) -> Errors | None:
    if not isinstance(value, str):
        return ["Not a valid string."]
    if not value.strip() and name not in rules.blank_allowed:
        return [BLANK]
    if kind.max_length is not None and len(value) > kind.max_length:
        return [f"Ensure this field has no more than {kind.max_length} characters."]
    return None


def _number_errors(kind: mi.FloatType, value: Any, strict: bool) -> Errors | None:
    if not _convertible(value, float, strict):
        return ["A valid number is required."]
    number = msgspec.convert(value, float, strict=False)
    if not math.isfinite(number):  # "NaN" or "inf" as a string
        return ["A valid number is required."]
    if kind.ge is not None and number < kind.ge:
        return [f"Ensure this value is greater than or equal to {kind.ge}."]
    if kind.le is not None and number > kind.le:
        return [f"Ensure this value is less than or equal to {kind.le}."]
    return None


def _integer_errors(kind: mi.IntType, value: Any, strict: bool) -> Errors | None:
    if isinstance(value, bool) or not _convertible(value, int, strict):
        return ["A valid integer is required."]
    number = msgspec.convert(value, int, strict=False)
    if kind.ge is not None and number < kind.ge:
        return [f"Ensure this value is greater than or equal to {kind.ge}."]
    if kind.le is not None and number > kind.le:
        return [f"Ensure this value is less than or equal to {kind.le}."]
    return None


def _list_errors(rules: _Rules, name: str, kind: mi.ListType, value: Any) -> Errors | None:
    if not isinstance(value, list):
        return [f'Expected a list of items but got type "{type(value).__name__}".']
    if kind.max_length is not None and len(value) > kind.max_length:
        return [f"Ensure this field has no more than {kind.max_length} elements."]
    if kind.min_length is not None and len(value) < kind.min_length:
        return [f"Ensure this field has at least {kind.min_length} elements."]
    items = {str(i): _value_errors(rules, name, kind.item_type, item) for i, item in enumerate(value)}
    return {i: problem for i, problem in items.items() if problem} or None


def _dict_errors(rules: _Rules, name: str, kind: mi.DictType, value: Any) -> Errors | None:
    if not isinstance(value, dict):
        return [f'Expected a dictionary of items but got type "{type(value).__name__}".']
    items = {str(k): _value_errors(rules, name, kind.value_type, item) for k, item in value.items()}
    return {k: problem for k, problem in items.items() if problem} or None


def _nested_errors(kind: mi.StructType, value: Any, strict: bool) -> Errors | None:
    if not isinstance(value, dict):
        return {"non_field_errors": [f"Invalid data. Expected a dictionary, but got {type(value).__name__}."]}
    errors = _struct_errors(kind, value, strict)
    if errors:
        return errors
    check = getattr(kind.cls, "cross_field_error", None)  # a nested body's own rule across fields
    problem = check(value) if check is not None else None
    return {"non_field_errors": [problem]} if problem else None


def _convertible(value: Any, kind: type[Any], strict: bool = False) -> bool:
    try:
        msgspec.convert(value, kind, strict=strict)
    except msgspec.ValidationError:
        return False
    return True
