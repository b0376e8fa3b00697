"""Validation shared by the command handlers: a failed check fails the whole workflow task."""

from __future__ import annotations

from typing import Any


class CommandRejected(Exception):
    """A command failed validation: the whole workflow task fails with ``cause``."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = f"WORKFLOW_TASK_FAILED_CAUSE_{cause}"
        self.message = message


def require_seconds(attrs: dict[str, Any], name: str, cause: str) -> float:
    value = attrs.get(name) or 0
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise CommandRejected(cause, f"{name} must be a non-negative number of seconds")
    return float(value)


def require_name(attrs: dict[str, Any], name: str, cause: str) -> str:
    value = attrs.get(name)
    if not isinstance(value, str) or not value or len(value) > 1000:
        raise CommandRejected(cause, f"{name} must be a string of 1 to 1000 characters")
    return value


def type_name(value: Any) -> str | None:
    """A ``{"name": ...}`` type (or a bare string), as Temporal's commands spell types."""
    name = value.get("name") if isinstance(value, dict) else value
    return name if isinstance(name, str) and name else None
