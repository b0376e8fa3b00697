"""Stable error codes and the base error every Chronicle layer raises.

Imports no app: the kernel, the API layer and the daemon all speak these codes, and
the API renders them as ``{"code": ..., "message": ..., "details": ...}``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    INVALID_ARGUMENT = "invalid_argument"
    MALFORMED_REQUEST = "malformed_request"
    INVALID_QUERY = "invalid_query"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNAUTHENTICATED = "unauthenticated"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    WORKFLOW_ALREADY_STARTED = "workflow_execution_already_started"
    WORKFLOW_NOT_RUNNING = "workflow_execution_already_completed"
    STALE_TASK = "stale_task_token"
    CONFLICT = "conflict"
    RATE_LIMITED = "resource_exhausted"
    BUSY_WORKFLOW = "busy_workflow"
    QUERY_FAILED = "query_failed"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    LIMIT_EXCEEDED = "limit_exceeded"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


_STATUS = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.MALFORMED_REQUEST: 400,
    ErrorCode.INVALID_QUERY: 400,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.WORKFLOW_ALREADY_STARTED: 409,
    ErrorCode.WORKFLOW_NOT_RUNNING: 404,
    ErrorCode.STALE_TASK: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.BUSY_WORKFLOW: 429,
    ErrorCode.QUERY_FAILED: 422,
    ErrorCode.DEADLINE_EXCEEDED: 504,
    ErrorCode.LIMIT_EXCEEDED: 400,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
}


class ChronicleError(Exception):
    """An error with a stable code, an HTTP status and optional details."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after

    @property
    def status(self) -> int:
        return _STATUS[self.code]

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": str(self.code), "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


def invalid(message: str, **details: Any) -> ChronicleError:
    return ChronicleError(ErrorCode.INVALID_ARGUMENT, message, details=details)


def not_found(message: str) -> ChronicleError:
    return ChronicleError(ErrorCode.NOT_FOUND, message)


# A body's field that its request does not have: refused, not ignored, on every route (a
# misspelt option silently dropped would run the call without it).
UNKNOWN_FIELD = "is not a field of this request"


def invalid_fields(fields: dict[str, Any]) -> ChronicleError:
    """The 400 for a body's field errors (``{field: [message]}``, nested for nested bodies);
    its message names the unknown fields, if any, by their dotted paths."""
    unknown = _paths_with(UNKNOWN_FIELD, fields)
    message = f"unknown field(s): {', '.join(unknown)}" if unknown else "invalid request"
    return ChronicleError(ErrorCode.INVALID_ARGUMENT, message, details={"fields": fields})


def _paths_with(message: str, errors: dict[str, Any], prefix: str = "") -> list[str]:
    found = []
    for name, sub in errors.items():
        path = f"{prefix}{name}"
        if isinstance(sub, list) and message in sub:
            found.append(path)
        elif isinstance(sub, dict):
            found += _paths_with(message, sub, path + ".")
    return found
