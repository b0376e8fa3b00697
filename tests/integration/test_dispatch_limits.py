"""The per-process cache of task-queue dispatch limits on the poll hot path."""

from __future__ import annotations

import uuid

import pytest

from matching import dispatch
from namespaces.models import Namespace, TaskQueueLimit


@pytest.mark.django_db
def test_queue_limit_is_cached_for_a_few_seconds_then_reread(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(dispatch.time, "monotonic", lambda: clock[0])
    ns = Namespace.objects.create(name=f"ns-{uuid.uuid4().hex[:8]}")
    limit = TaskQueueLimit.objects.create(namespace=ns, task_queue="q", dispatch_rps=5)

    assert dispatch._queue_dispatch_rps(ns, "q") == 5
    limit.dispatch_rps = 50
    limit.save()
    assert dispatch._queue_dispatch_rps(ns, "q") == 5, "read again inside the cache window"

    clock[0] += dispatch.QUEUE_LIMIT_CACHE_SECONDS + 0.1
    assert dispatch._queue_dispatch_rps(ns, "q") == 50, "a changed limit takes effect after the window"
    limit.delete()
    clock[0] += dispatch.QUEUE_LIMIT_CACHE_SECONDS + 0.1
    assert dispatch._queue_dispatch_rps(ns, "q") == 0
