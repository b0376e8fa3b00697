"""Search attribute names and the typing of their values.

Custom attributes are registered per namespace (``SearchAttribute``); system attributes
are the run's own columns and cannot be set by workflows. Values are stored in the
run's ``search_attributes`` JSONB in one canonical form per type, so the visibility
queries and their indexes can compare them as stored: Datetime as a fixed-width UTC
string (``2026-01-02T03:04:05.000000Z``, which sorts as time does), Int as a JSON
integer, Double as a JSON number, KeywordList as an array of strings.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

from namespaces.models import IndexedValueType, Namespace, SearchAttribute

T = IndexedValueType

SYSTEM_ATTRIBUTES: dict[str, IndexedValueType] = {
    "WorkflowId": T.KEYWORD,
    "RunId": T.KEYWORD,
    "WorkflowType": T.KEYWORD,
    "ExecutionStatus": T.KEYWORD,
    "TaskQueue": T.KEYWORD,
    "ParentWorkflowId": T.KEYWORD,
    "ParentRunId": T.KEYWORD,
    "StartTime": T.DATETIME,
    "ExecutionTime": T.DATETIME,
    "CloseTime": T.DATETIME,
    "HistoryLength": T.INT,
    "HistorySizeBytes": T.INT,
    "ExecutionDuration": T.INT,
    # Computed from the run's mutable state, for finding stuck and failing runs.
    "WorkflowTaskAttempt": T.INT,
    "PendingActivityAttempt": T.INT,
    "FailureMessage": T.KEYWORD,
}
RESERVED_NAMES = frozenset({"NamespaceId", "Memo", "MemoEncoding", "VisibilityTaskKey"})
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
MAX_KEYS = 100
MAX_VALUE_BYTES = 2 * 1024
MAX_TOTAL_BYTES = 40 * 1024


class BadSearchAttributes(ValueError):
    """A value or name the namespace's search attributes refuse."""


def custom_attributes(namespace: Namespace) -> dict[str, IndexedValueType]:
    """The namespace's registered custom attributes and their types."""
    return {
        row.name: IndexedValueType(row.type) for row in SearchAttribute.objects.filter(namespace=namespace)
    }


def check_name(name: str) -> None:
    """Refuse a name an admin may not register (system, reserved, ``Temporal…``, odd characters)."""
    if not NAME_PATTERN.match(name):
        raise BadSearchAttributes(f"search attribute name {name!r} must match {NAME_PATTERN.pattern}")
    if name in SYSTEM_ATTRIBUTES or name in RESERVED_NAMES:
        raise BadSearchAttributes(f"{name!r} is a system or reserved search attribute name")
    if name.startswith("Temporal"):
        raise BadSearchAttributes(f"custom search attribute names may not start with 'Temporal' ({name!r})")


def format_datetime(moment: datetime) -> str:
    """The canonical stored form: UTC, microseconds, fixed width, so text order is time order."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_datetime(text: str) -> datetime:
    """An RFC 3339 / ISO 8601 string; a value without an offset is taken as UTC."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadSearchAttributes(f"{text!r} is not an RFC 3339 datetime") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _scalar(name: str, kind: IndexedValueType, value: Any) -> Any:
    wrong = BadSearchAttributes(f"search attribute {name!r} is {kind}: {value!r} is not a {kind} value")
    if kind in (T.KEYWORD, T.TEXT):
        if not isinstance(value, str):
            raise wrong
        return value
    if kind == T.INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong
        return value
    if kind == T.DOUBLE:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise wrong
        return float(value)
    if kind == T.BOOL:
        if not isinstance(value, bool):
            raise wrong
        return value
    if not isinstance(value, str):
        raise wrong
    return format_datetime(parse_datetime(value))


def normalize_value(name: str, kind: IndexedValueType, value: Any) -> Any:
    """One value in canonical form; ``None`` means "remove the attribute".

    Accepts the SDK's dict form too, where every value is a list (``{"Name": [v]}``):
    an empty list removes, a one-element list is that value for a scalar type.
    """
    if value is None or value == []:
        return None
    if kind == T.KEYWORD_LIST:
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(item, str) for item in items):
            raise BadSearchAttributes(
                f"search attribute {name!r} is KeywordList: every value must be a string"
            )
        return items
    if isinstance(value, list):
        if len(value) != 1:
            raise BadSearchAttributes(f"search attribute {name!r} is {kind}: it takes one value, not a list")
        value = value[0]
    return _scalar(name, kind, value)


def normalize_search_attributes(namespace: Namespace, attributes: Any) -> dict[str, Any]:
    """Type-check ``attributes`` against the namespace; return them canonical (removals as ``None``)."""
    if not isinstance(attributes, dict):
        raise BadSearchAttributes("search_attributes must be an object")
    if not attributes:
        return {}
    if len(attributes) > MAX_KEYS:
        raise BadSearchAttributes(f"at most {MAX_KEYS} search attributes")
    known = custom_attributes(namespace)
    result: dict[str, Any] = {}
    for name, value in attributes.items():
        if name in SYSTEM_ATTRIBUTES:
            raise BadSearchAttributes(f"{name!r} is a system search attribute and cannot be set")
        if name not in known:
            raise BadSearchAttributes(
                f"search attribute {name!r} is not registered in namespace {namespace.name!r}"
            )
        result[name] = normalize_value(name, known[name], value)
        if len(json.dumps(result[name])) > MAX_VALUE_BYTES:
            raise BadSearchAttributes(f"search attribute {name!r} is larger than {MAX_VALUE_BYTES} bytes")
    if len(json.dumps(result)) > MAX_TOTAL_BYTES:
        raise BadSearchAttributes(f"search attributes are larger than {MAX_TOTAL_BYTES} bytes in total")
    return result


def merge_search_attributes(current: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    """Apply ``updates`` to a run's attributes: ``None`` (or an empty list) removes a key."""
    merged = {**current, **updates}
    return {name: value for name, value in merged.items() if value is not None and value != []}
