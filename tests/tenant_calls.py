"""A tenant's calls on a frontend, as the outage tests make them: a start and the list."""

from __future__ import annotations

import httpx

from tests.conftest import Tenant


class TenantCalls:
    """An HTTP client of ``tenant``'s namespace on ``frontend``, and the two calls the
    outage tests time: a workflow start (a write) and the list of runs (a read)."""

    def __init__(self, frontend: str, tenant: Tenant, timeout: float) -> None:
        self.client = httpx.Client(
            base_url=f"{frontend}/api/v1/namespaces/{tenant.namespace}/",
            headers={"Authorization": f"Bearer {tenant.keys['all']}"},
            timeout=timeout,
        )

    def start(self, workflow_id: str) -> httpx.Response:
        body = {"workflow_id": workflow_id, "workflow_type": "T", "task_queue": "q"}
        return self.client.post("workflows", json=body)

    def listing(self) -> httpx.Response:
        return self.client.get("workflows")
