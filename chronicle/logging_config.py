"""Logs: one JSON object a line in production, readable text in development.

``CHRONICLE_LOG_FORMAT`` switches (``json`` or ``text``, the default). Every record of a
request carries what is known about it: ``request_id`` (the caller's ``X-Request-ID``,
e.g. from a load balancer, or one made up for the request), ``namespace``, ``workflow_id``
and ``run_id`` (read from the URL, where it names them), and ``workflow_id``/``run_id``
when the code that logs passes them (``log.warning(..., extra={"workflow_id": ..., "run_id": ...})``).

What the hot path pays is one ``ContextVar.set`` per request (:func:`bind_request`, in
``chronicle.asgi``): the fields are read from the request's ASGI scope only when a record
is actually written, which for a call that succeeds is never.

This module imports nothing of Django, so gunicorn's config uses it too (its own error log
and the access log of its uvicorn workers, in the same format).
"""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

_REQUEST: ContextVar[dict[str, Any] | None] = ContextVar("chronicle_request", default=None)
_API_PREFIX = "/api/v1/namespaces/"
# Record attributes a caller may pass with ``extra=`` that the JSON line carries.
CONTEXT_FIELDS = ("request_id", "namespace", "workflow_id", "run_id")


def bind_request(scope: dict[str, Any]) -> None:
    """Make ``scope`` the current request of this task (and of the threads it calls)."""
    _REQUEST.set(scope)


def request_fields() -> dict[str, str]:
    """The current request's id, namespace and workflow id, as far as they are known."""
    scope = _REQUEST.get()
    if scope is None:
        return {}
    fields = {"request_id": _request_id(scope)}
    path: str = scope.get("path", "")
    if path.startswith(_API_PREFIX):
        parts = path[len(_API_PREFIX) :].split("/")
        fields["namespace"] = parts[0]
        if len(parts) > 2 and parts[1] == "workflows" and parts[2]:
            fields["workflow_id"] = parts[2]
            if len(parts) > 4 and parts[3] == "runs" and parts[4]:
                fields["run_id"] = parts[4]
    return fields


def _request_id(scope: dict[str, Any]) -> str:
    known: str | None = scope.get("chronicle.request_id")
    if known is None:
        known = next(
            (bytes(v).decode("latin-1")[:200] for k, v in scope.get("headers", ()) if k == b"x-request-id"),
            uuid.uuid4().hex[:16],
        )
        scope["chronicle.request_id"] = known
    return known


class RequestContext(logging.Filter):
    """Puts the current request's fields on each record (without overriding ``extra=``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in request_fields().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...context, "exception"?}``, one a line.

    A uvicorn access-log record also gets its parts as fields (client, method, path,
    status), so a log pipeline can filter on them without parsing the message.
    """

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = str(value)
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            client, method, path, _, status = record.args
            line.update(client=client, method=method, path=path, status=status)
        if record.exc_info:
            line["exception"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(line, default=str)


def logging_settings(log_format: str, level: str) -> dict[str, Any]:
    """Django's ``LOGGING`` for ``log_format`` (``json`` or ``text``) at ``level``."""
    if log_format not in ("json", "text"):
        raise ValueError(f"CHRONICLE_LOG_FORMAT must be json or text, not {log_format!r}")
    formatters: dict[str, Any] = {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "chronicle.logging_config.JsonFormatter"},
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request": {"()": "chronicle.logging_config.RequestContext"}},
        "formatters": {log_format: formatters[log_format]},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": log_format, "filters": ["request"]}
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.db.backends": {"level": "WARNING"}},
    }


def gunicorn_logconfig(level: str, *, access: bool) -> dict[str, Any]:
    """gunicorn's ``logconfig_dict`` writing its error log (stderr) and, when ``access``,
    the access log (stdout) as JSON lines; the uvicorn workers log through these handlers."""
    handler = {"formatter": "json", "filters": ["request"]}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request": {"()": "chronicle.logging_config.RequestContext"}},
        "formatters": {"json": {"()": "chronicle.logging_config.JsonFormatter"}},
        "handlers": {
            "error_console": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", **handler},
            "console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", **handler},
        },
        "root": {"level": level.upper(), "handlers": []},
        "loggers": {
            "gunicorn.error": {"level": level.upper(), "handlers": ["error_console"], "propagate": False},
            "gunicorn.access": {
                "level": "INFO",
                "handlers": ["console"] if access else [],
                "propagate": False,
            },
        },
    }
