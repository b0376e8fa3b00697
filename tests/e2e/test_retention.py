"""Retention: a closed run's history is deleted by the timer queue once it expires."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from history.kernel.archival import archive_name, archive_storage, read_archive
from history.kernel.payloads import collect_unreferenced
from history.models import Payload
from namespaces.models import Namespace
from sdk._runtime.replayer import WorkflowHistory
from tests.conftest import ROOT, Api, Stack, Tenant, wait_until


def test_closed_run_is_deleted_after_retention(stack: Stack, make_tenant: Callable[..., Tenant]) -> None:
    api = Api(stack, make_tenant(retention_days=0))
    wid = f"ret-{uuid.uuid4().hex[:8]}"
    api.start(wid, "q-retention")
    assert api.post(f"/workflows/{wid}/terminate", {"reason": "done"}).status_code == 200

    wait_until(lambda: api.get(f"/workflows/{wid}").status_code == 404, timeout=10)
    assert api.get(f"/workflows/{wid}/history").status_code == 404


BIG = {"metadata": {"encoding": "json/plain"}, "data": "z" * 20_000}


def _close_with_big_signal(api: Api, wid: str) -> str:
    run_id = str(api.start(wid, "q-retention")["run_id"])
    r = api.post(f"/workflows/{wid}/signal", {"signal_name": "big", "input": [BIG]})
    assert r.status_code == 200, r.text
    assert api.post(f"/workflows/{wid}/terminate", {"reason": "done"}).status_code == 200
    return run_id


def _namespace(tenant: Tenant, django_db_blocker: Any) -> Namespace:
    with django_db_blocker.unblock():
        return Namespace.objects.get(name=tenant.namespace)


def test_archival_writes_a_readable_history_then_deletes(
    stack: Stack, make_tenant: Callable[..., Tenant], django_db_blocker: Any
) -> None:
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    tenant = make_tenant(retention_days=0, archival_enabled=True, archival_prefix=prefix)
    api = Api(stack, tenant)
    wid = f"arc-{uuid.uuid4().hex[:8]}"
    run_id = _close_with_big_signal(api, wid)
    wait_until(lambda: api.get(f"/workflows/{wid}").status_code == 404, timeout=10)

    namespace = _namespace(tenant, django_db_blocker)
    name = archive_name(namespace, wid, run_id)
    assert archive_storage().exists(name)
    execution, events = read_archive(name)
    assert execution["run_id"] == run_id and execution["status"] == "Terminated"
    types = [e["event_type"] for e in events]
    assert types[0] == "WorkflowExecutionStarted" and types[-1] == "WorkflowExecutionTerminated"
    signaled = next(e for e in events if e["event_type"] == "WorkflowExecutionSignaled")
    assert signaled["attributes"]["input"] == [BIG]  # the stored payload is back inline

    out = subprocess.run(
        [sys.executable, "manage.py", "archived_history", tenant.namespace, wid],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    history = WorkflowHistory.from_json(out)
    assert history.run_id == run_id and history.events == events
    missing = subprocess.run(
        [sys.executable, "manage.py", "archived_history", tenant.namespace, "never-ran"],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
    )
    assert missing.returncode != 0 and "no archived history" in missing.stderr


def test_without_archival_nothing_is_written(
    stack: Stack, make_tenant: Callable[..., Tenant], django_db_blocker: Any
) -> None:
    tenant = make_tenant(retention_days=0)
    api = Api(stack, tenant)
    wid = f"noarc-{uuid.uuid4().hex[:8]}"
    run_id = _close_with_big_signal(api, wid)
    wait_until(lambda: api.get(f"/workflows/{wid}").status_code == 404, timeout=10)
    namespace = _namespace(tenant, django_db_blocker)
    assert not archive_storage().exists(archive_name(namespace, wid, run_id))


def test_a_failed_archival_keeps_the_run_until_it_succeeds(
    stack: Stack, make_tenant: Callable[..., Tenant], django_db_blocker: Any
) -> None:
    # A prefix that escapes the archive's directory: the storage refuses every write.
    tenant = make_tenant(retention_days=0, archival_enabled=True, archival_prefix="../../outside")
    api = Api(stack, tenant)
    wid = f"arcfail-{uuid.uuid4().hex[:8]}"
    run_id = _close_with_big_signal(api, wid)
    time.sleep(3)
    assert api.get(f"/workflows/{wid}").status_code == 200

    with django_db_blocker.unblock():
        Namespace.objects.filter(name=tenant.namespace).update(archival_prefix=f"t-{uuid.uuid4().hex[:8]}")
    wait_until(lambda: api.get(f"/workflows/{wid}").status_code == 404, timeout=30)
    assert archive_storage().exists(archive_name(_namespace(tenant, django_db_blocker), wid, run_id))


def test_payloads_no_run_refers_to_are_collected(
    stack: Stack, make_tenant: Callable[..., Tenant], django_db_blocker: Any
) -> None:
    tenant = make_tenant(retention_days=0)
    api = Api(stack, tenant)
    kept = make_tenant(retention_days=30)
    keeper = Api(stack, kept)
    gone_wid, kept_wid = f"gc-{uuid.uuid4().hex[:8]}", f"gc-{uuid.uuid4().hex[:8]}"
    _close_with_big_signal(keeper, kept_wid)
    _close_with_big_signal(api, gone_wid)
    wait_until(lambda: api.get(f"/workflows/{gone_wid}").status_code == 404, timeout=10)

    with django_db_blocker.unblock():
        stored = Payload.objects.filter(namespace__name__in=[tenant.namespace, kept.namespace])
        assert stored.count() == 2  # one per namespace: the store is per tenant
        while collect_unreferenced(batch_size=1, grace=timedelta(0)):
            pass
        assert list(stored.values_list("namespace__name", flat=True)) == [kept.namespace]
    assert keeper.describe(kept_wid)["status"] == "Terminated"
