"""Crash windows: a frontend killed after commit but before its reply loses nothing."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ROOT, Api, Stack, Tenant, free_port, wait_until


@pytest.fixture
def crashing_frontend(stack: Stack) -> Iterator[str]:
    """A single-process frontend that dies right after committing a start."""
    port = free_port()
    env = {**stack.env, "CHRONICLE_FAULTS": "after_commit_before_reply"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "chronicle.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/api/schema/", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout=30)
    yield url
    proc.kill()
    proc.wait()


def test_start_committed_before_a_crash_is_found_by_its_retry(
    crashing_frontend: str, api: Api, tenant: Tenant
) -> None:
    wid = f"crash-{uuid.uuid4().hex[:8]}"
    body = {"workflow_id": wid, "workflow_type": "T", "task_queue": "q", "request_id": "req-1"}
    headers = {"Authorization": f"Bearer {tenant.keys['all']}"}
    with pytest.raises(httpx.HTTPError):
        httpx.post(
            f"{crashing_frontend}/api/v1/namespaces/{tenant.namespace}/workflows",
            json=body,
            headers=headers,
            timeout=10,
        )

    retried = api.post("/workflows", body)  # the client retries on a healthy frontend

    assert retried.status_code == 201, retried.text
    runs = api.get("/workflows", query=f"WorkflowId = '{wid}'").json()["executions"]
    assert len(runs) == 1 and runs[0]["run_id"] == retried.json()["run_id"]
