"""Retention: a closed run's history is deleted by the timer queue once it expires."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from tests.conftest import Api, Stack, Tenant, wait_until


def test_closed_run_is_deleted_after_retention(stack: Stack, make_tenant: Callable[..., Tenant]) -> None:
    api = Api(stack, make_tenant(retention_days=0))
    wid = f"ret-{uuid.uuid4().hex[:8]}"
    api.start(wid, "q-retention")
    assert api.post(f"/workflows/{wid}/terminate", {"reason": "done"}).status_code == 200

    wait_until(lambda: api.get(f"/workflows/{wid}").status_code == 404, timeout=10)
    assert api.get(f"/workflows/{wid}/history").status_code == 404
