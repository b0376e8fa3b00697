"""DRF glue shared by every API: the strict JSON parser and the error renderer.

Bad input must yield a clear 4xx and never reach the database half-checked: the
parser refuses NUL characters (PostgreSQL's JSONB cannot store them), ``NaN`` and
``Infinity`` (not JSON), deep nesting and oversized bodies before a view runs.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework import serializers
from rest_framework.parsers import BaseParser
from rest_framework.response import Response

from chronicle.db import unavailable
from chronicle.errors import UNKNOWN_FIELD, ChronicleError, ErrorCode, invalid_fields

MAX_JSON_DEPTH = 64
# The longest duration a request may name (timeouts, delays, intervals): a hundred years.
# Past it a moment no longer fits a datetime ("1e300" seconds used to fail with a 500).
MAX_SECONDS = 100 * 365.25 * 86400


def _check_json(value: Any, depth: int = 0) -> None:
    if depth > MAX_JSON_DEPTH:
        raise ChronicleError(ErrorCode.MALFORMED_REQUEST, f"JSON nested deeper than {MAX_JSON_DEPTH}")
    if isinstance(value, str):
        if "\x00" in value:
            raise ChronicleError(ErrorCode.MALFORMED_REQUEST, "strings may not contain NUL (\\u0000)")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_json(key, depth + 1)
            _check_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json(item, depth + 1)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def loads(raw: bytes | str) -> Any:
    """Standard JSON only: Python's ``json`` also reads ``NaN``, ``Infinity`` and numbers
    that overflow to infinity, which PostgreSQL's JSONB (and every other JSON reader)
    refuses, so a body holding one would pass every check and fail at the write."""
    return json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite)


def parse_json_body(raw: bytes) -> Any:
    """Decode and vet a request body; raise ChronicleError on anything unusable.

    Only an empty body means no fields: one of whitespace alone is no JSON document, so it
    is malformed like any other."""
    if len(raw) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        raise ChronicleError(ErrorCode.PAYLOAD_TOO_LARGE, "request body too large")
    if not raw:
        return {}
    try:
        value = loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ChronicleError(ErrorCode.MALFORMED_REQUEST, f"malformed JSON: {exc}") from None
    _check_json(value)
    if not isinstance(value, dict):
        raise ChronicleError(ErrorCode.MALFORMED_REQUEST, "the body must be a JSON object")
    return value


class StrictJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        return parse_json_body(raw)


def error_response(error: ChronicleError) -> Response:
    response = Response(error.as_dict(), status=error.status)
    if error.retry_after is not None:
        response["Retry-After"] = str(max(1, int(error.retry_after + 0.999)))
    return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Render every failure as ``{code, message, details}`` with its status."""
    if isinstance(exc, ChronicleError):
        return error_response(exc)
    outage = unavailable(exc)
    if outage is not None:
        return error_response(outage)
    if isinstance(exc, Http404):
        return error_response(ChronicleError(ErrorCode.NOT_FOUND, "not found"))
    if isinstance(exc, drf_exceptions.ValidationError):
        return error_response(
            ChronicleError(ErrorCode.INVALID_ARGUMENT, "invalid request", details={"fields": exc.detail})
        )
    if isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
        return error_response(ChronicleError(ErrorCode.UNAUTHENTICATED, str(exc.detail)))
    if isinstance(exc, drf_exceptions.ParseError | drf_exceptions.UnsupportedMediaType):
        return error_response(ChronicleError(ErrorCode.MALFORMED_REQUEST, str(exc.detail)))
    if isinstance(exc, drf_exceptions.MethodNotAllowed):
        return Response({"code": "method_not_allowed", "message": str(exc.detail)}, status=405)
    if isinstance(exc, drf_exceptions.APIException):
        return Response({"code": "error", "message": str(exc.detail)}, status=exc.status_code)
    return None


def refuse_unknown_fields(serializer: serializers.BaseSerializer[Any], data: Any) -> None:
    """Refuse a body with a field ``serializer`` does not have, at any depth of its nested
    serializers: DRF would drop it unread, and a misspelt option (``reasn``,
    ``execution_timout``) would run the call without it. The lean lane's bodies refuse
    theirs the same way (``forbid_unknown_fields``)."""
    fields = unknown_fields(serializer, data)
    if fields:
        raise invalid_fields(fields)


def unknown_fields(serializer: Any, data: Any) -> dict[str, Any]:
    """The fields of ``data`` that ``serializer`` lacks, as field errors (``{}`` if none);
    data of the wrong shape is left to the serializer's own validation."""
    if isinstance(serializer, serializers.ListSerializer | serializers.ListField):
        if not isinstance(data, list):
            return {}
        items = {str(i): unknown_fields(serializer.child, item) for i, item in enumerate(data)}
        return {i: errors for i, errors in items.items() if errors}
    if not isinstance(serializer, serializers.Serializer) or not isinstance(data, dict):
        return {}
    known = serializer.fields
    errors: dict[str, Any] = {}
    for name, value in data.items():
        if name not in known:
            errors[name] = [UNKNOWN_FIELD]
        elif nested := unknown_fields(known[name], value):
            errors[name] = nested
    return errors


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of coercing them to text, and
    text longer than ``max_length`` as sent: DRF measures it once trimmed, so a value the
    schema's ``maxLength`` calls too long was taken when its excess was whitespace (the lean
    lane's structs measure it as sent too)."""

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class SecondsField(serializers.FloatField):
    """A duration in seconds: finite ("inf" and "nan" are refused, which ``float()``
    reads), at least ``min_value`` (default 0) and at most :data:`MAX_SECONDS`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_SECONDS)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        value = float(super().to_internal_value(data))
        if not math.isfinite(value):
            self.fail("invalid")
        return value


def refuse_nul(value: str, what: str) -> None:
    """Path parameters never pass the JSON parser: check them before they reach a query."""
    if "\x00" in value:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, f"{what} may not contain NUL characters")
