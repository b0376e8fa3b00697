"""Reads a history exported from Temporal (``temporal workflow show --output json``, or the web
UI's download) into Chronicle's event shape, so it replays against ported workflow code.

Temporal's export is protobuf's JSON: camelCase fields, ``"eventId": "1"`` (64-bit ints as
text), ``"eventType": "EVENT_TYPE_TIMER_FIRED"`` (or ``"TimerFired"`` in older exports),
durations as ``"10s"``, attributes under ``timerFiredEventAttributes``, payload lists as
``{"payloads": [...]}`` and each payload's metadata and data in base64. Chronicle writes
snake_case, ints, seconds, ``attributes`` and its own payload JSON (``converter.payload_to_wire``).

Ids that Temporal's SDK chose itself are renumbered: Temporal numbers activities, timers
and so on each from 1, Chronicle numbers all of a run's commands in one sequence, so an
activity id ``"1"`` followed by a timer id ``"1"`` become ``"1"`` and ``"2"``. Ids the
workflow chose (``activity_id=...``) are kept. Patch markers are read into Chronicle's
marker details.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from typing import Any

from sdk._runtime.commands import EVENT_COMMANDS, PATCH_MARKER
from sdk.api.common.v1 import Payload
from sdk.api.enums.v1 import EventType
from sdk.converter import payload_to_wire

_INT_FIELDS = {"event_id", "task_id", "version", "history_size_bytes"}
_DURATION_SUFFIXES = ("_timeout", "_interval", "_backoff", "_delay")
_DURATION = re.compile(r"^-?\d+(\.\d+)?s$")
_NAMED_TYPE_INFOS = {"activity_failure_info", "child_workflow_execution_failure_info"}
_PAYLOAD_KEYS = {"metadata", "data", "externalPayloads"}
_TIMESTAMP = re.compile(
    r"^(?P<head>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(?P<fraction>\d+))?(?P<zone>Z|[+-]\d\d:\d\d)?$"
)


def is_temporal_export(value: dict[str, Any] | list[Any]) -> bool:
    """True for Temporal's JSON shape (camelCase ``eventId``; ``{"events": [...]}`` or the
    bare list older tools wrote), false for Chronicle's own."""
    events = value.get("events") or [] if isinstance(value, dict) else value
    return bool(events) and isinstance(events[0], dict) and "eventId" in events[0]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _payload(value: dict[str, Any]) -> dict[str, Any]:
    metadata = {key: base64.b64decode(item) for key, item in (value.get("metadata") or {}).items()}
    return payload_to_wire(Payload(metadata, base64.b64decode(value.get("data") or "")))


def _is_payload(value: dict[str, Any]) -> bool:
    return isinstance(value.get("metadata"), dict) and set(value) <= _PAYLOAD_KEYS


def _value(key: str, value: Any) -> Any:
    """One field converted (``key`` is already snake_case)."""
    if isinstance(value, dict):
        if _is_payload(value):
            return _payload(value)
        if set(value) == {"payloads"}:
            return [_payload(item) for item in value["payloads"]]
        if set(value) in ({"fields"}, {"indexedFields"}):  # memo, header, search attributes
            return _value(key, next(iter(value.values())))
        converted = {_snake(name): _value(_snake(name), item) for name, item in value.items()}
        if key in _NAMED_TYPE_INFOS:  # Chronicle's failure infos name the type as text
            for field in ("activity_type", "workflow_type"):
                if isinstance(converted.get(field), dict):
                    converted[field] = converted[field].get("name")
        return converted
    if isinstance(value, list):
        return [_value(key, item) for item in value]
    if isinstance(value, str):
        if (key in _INT_FIELDS or key.endswith("_event_id")) and value.lstrip("-").isdigit():
            return int(value)
        if key.endswith(_DURATION_SUFFIXES) and _DURATION.match(value):
            return float(value[:-1])
    return value


def _event_time(text: str) -> str:
    """ISO text Python reads: protobuf writes ``Z`` and up to nine fractional digits."""
    match = _TIMESTAMP.match(text)
    if match is None:
        raise ValueError(f"unreadable eventTime {text!r}")
    fraction = (match["fraction"] or "0")[:6].ljust(6, "0")
    zone = match["zone"] if match["zone"] not in (None, "Z") else "+00:00"
    return datetime.fromisoformat(f"{match['head']}.{fraction}{zone}").astimezone(UTC).isoformat()


def _event(raw: dict[str, Any]) -> dict[str, Any]:
    name = next((key for key in raw if key.endswith("EventAttributes")), None)
    return {
        "event_id": int(raw["eventId"]),
        "event_type": EventType.from_name(str(raw["eventType"])).short_name,
        "event_time": _event_time(str(raw.get("eventTime") or "1970-01-01T00:00:00Z")),
        "attributes": _value("attributes", raw[name]) if name else {},
    }


class _Renumbering:
    """Temporal's per-kind command ids mapped onto Chronicle's single command sequence."""

    def __init__(self) -> None:
        self.commands = 0
        self.per_kind: dict[str, int] = {}
        self.timers: dict[str, str] = {}

    def apply(self, event: dict[str, Any]) -> None:
        kind, attrs = event["event_type"], event["attributes"]
        if kind in EVENT_COMMANDS:
            self.commands += 1
        if kind == "ActivityTaskScheduled":
            attrs["activity_id"] = self._renumbered("activity", str(attrs.get("activity_id")))
        elif kind == "TimerStarted":
            new = self._renumbered("timer", str(attrs.get("timer_id")))
            self.timers[str(attrs.get("timer_id"))] = new
            attrs["timer_id"] = new
        elif kind in ("TimerFired", "TimerCanceled") and str(attrs.get("timer_id")) in self.timers:
            attrs["timer_id"] = self.timers[str(attrs["timer_id"])]
        elif kind == "MarkerRecorded" and attrs.get("marker_name") == PATCH_MARKER:
            attrs["details"] = _patch_details(attrs.get("details") or {})

    def _renumbered(self, kind: str, given: str) -> str:
        self.per_kind[kind] = self.per_kind.get(kind, 0) + 1
        return str(self.commands) if given == str(self.per_kind[kind]) else given


def _patch_details(details: dict[str, Any]) -> dict[str, Any]:
    """Temporal's ``patch_data`` (``{"id": ..., "deprecated": ...}``) as Chronicle's marker details."""
    [data] = details.get("patch_data") or [None]
    if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
        return details
    json_plain = {"encoding": "json/plain"}
    return {
        "patch_id": {"metadata": json_plain, "data": data["data"].get("id")},
        "deprecated": {"metadata": json_plain, "data": bool(data["data"].get("deprecated"))},
    }


def chronicle_events(export: dict[str, Any] | list[Any]) -> list[dict[str, Any]]:
    """The events of a Temporal JSON export in Chronicle's shape."""
    renumbering = _Renumbering()
    events = []
    for raw in (export.get("events") or []) if isinstance(export, dict) else export:
        event = _event(raw)
        renumbering.apply(event)
        events.append(event)
    return events
