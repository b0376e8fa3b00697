"""CHRONICLE_LOG_FORMAT=json: a frontend's lines are JSON objects carrying the request's
id, namespace and workflow id; the access log too. The text format stays readable."""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from chronicle.launcher import ProcessGroup, frontend_process
from chronicle.logging_config import (
    JsonFormatter,
    RequestContext,
    bind_request,
    logging_settings,
    request_fields,
)
from tests.conftest import Stack, Tenant, free_port, wait_until


def json_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_json_logs_carry_the_request_id_namespace_and_workflow(
    stack: Stack, make_tenant: Callable[..., Tenant], tmp_path: Path
) -> None:
    tenant = make_tenant()
    port = free_port()
    env = {
        **stack.env,
        "CHRONICLE_LOG_FORMAT": "json",
        "CHRONICLE_LOG_LEVEL": "INFO",
        "CHRONICLE_ACCESS_LOG": "-",
    }
    with ProcessGroup([frontend_process(port)], env=env, log_dir=tmp_path) as group:
        base = f"http://127.0.0.1:{port}"
        group.wait_http(base, timeout=30)
        headers = {"Authorization": f"Bearer {tenant.keys['all']}", "X-Request-ID": "req-from-the-balancer"}
        missing = httpx.get(
            f"{base}/api/v1/namespaces/{tenant.namespace}/workflows/no-such-wf", headers=headers
        )
        assert missing.status_code == 404
        log = tmp_path / "frontend.log"
        wait_until(lambda: any(line.get("status") == 404 for line in json_lines(log)), timeout=10)
    lines = json_lines(log)
    plain = [line for line in log.read_text().splitlines() if line.strip() and not line.startswith("{")]
    assert plain == [], plain  # every line is JSON, gunicorn's own included
    warning = next(line for line in lines if line["logger"] == "django.request")
    assert warning["level"] == "WARNING"
    assert warning["request_id"] == "req-from-the-balancer"
    assert warning["namespace"] == tenant.namespace
    assert warning["workflow_id"] == "no-such-wf"
    access = next(line for line in lines if line["logger"] == "uvicorn.access" and line["status"] == 404)
    assert access["method"] == "GET"
    assert access["request_id"] == "req-from-the-balancer"
    assert str(access["path"]).endswith("/workflows/no-such-wf")
    assert any(line["logger"] == "gunicorn.error" for line in lines)


def fields_of(path: str) -> dict[str, str]:
    """The log fields of a request for ``path``, bound in a context of its own."""

    def bound() -> dict[str, str]:
        bind_request({"path": path, "headers": []})
        return request_fields()

    return contextvars.copy_context().run(bound)


def test_a_record_outside_requests_has_no_request_fields_and_extra_fields_win() -> None:
    formatter, context = JsonFormatter(), RequestContext()
    record = logging.LogRecord("chronicle.shard_owner", logging.INFO, __file__, 1, "fired %d", (3,), None)
    context.filter(record)
    assert json.loads(formatter.format(record)).keys() == {"time", "level", "logger", "message"}

    def in_a_request() -> dict[str, str]:
        bind_request({"path": "/api/v1/namespaces/acme/workflows/order-7/signal", "headers": []})
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", (), None)
        record.run_id = "run-1"
        record.workflow_id = "from-extra"
        context.filter(record)
        return dict(json.loads(formatter.format(record)))

    line = contextvars.copy_context().run(in_a_request)  # the binding ends with that context
    assert "run_id" not in fields_of("/api/v1/namespaces/acme/workflows/w/signal")
    from_path = fields_of("/api/v1/namespaces/acme/workflows/w/runs/r-9/history")
    assert (from_path["workflow_id"], from_path["run_id"]) == ("w", "r-9")
    assert (line["namespace"], line["workflow_id"], line["run_id"]) == ("acme", "from-extra", "run-1")
    assert len(line["request_id"]) == 16


def test_the_text_format_is_the_readable_default_and_a_bad_format_is_refused() -> None:
    assert logging_settings("text", "INFO")["handlers"]["console"]["formatter"] == "text"
    with pytest.raises(ValueError, match="CHRONICLE_LOG_FORMAT"):
        logging_settings("xml", "INFO")
