"""Tidy pages: sticky queues folded under their queue, one status badge, through Django's
test client on real PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from matching.models import Poller
from namespaces.models import MemberRole, Namespace
from tests.factories import ExecutionFactory, MembershipFactory, NamespaceFactory

pytestmark = pytest.mark.django_db


def viewer_of(namespace: Namespace) -> Client:
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=MemberRole.VIEWER).user)
    return client


def poller(namespace: Namespace, queue: str, identity: str, seen_ago: timedelta) -> None:
    Poller.objects.create(
        namespace=namespace,
        task_queue=queue,
        kind="workflow",
        identity=identity,
        last_seen_at=timezone.now() - seen_ago,
    )


def test_sticky_queues_fold_under_their_queue_with_their_worker_alive_or_gone() -> None:
    namespace = NamespaceFactory(name="shop")
    poller(namespace, "orders", "worker-a", timedelta(seconds=1))
    poller(namespace, "orders-sticky-0123456789ab", "worker-a", timedelta(seconds=1))
    poller(namespace, "orders-sticky-ba9876543210", "worker-b", timedelta(minutes=2))
    body = viewer_of(namespace).get("/ns/shop/task-queues/").content.decode()

    assert body.count('href="/ns/shop/task-queues/orders') == 1  # one queue listed, not three
    folded = body[body.index('class="sticky-row"') :]
    assert "2 worker sticky queues, 1 of them gone" in folded
    assert "worker worker-a, polling" in folded and "worker worker-b, <strong>gone</strong>" in folded


def test_statuses_are_one_badge_in_the_list_and_on_the_run_page() -> None:
    namespace = NamespaceFactory(name="shop")
    run = ExecutionFactory(namespace=namespace, workflow_id="order-1")
    viewer = viewer_of(namespace)
    listed = viewer.get("/ns/shop/").content.decode()
    page = viewer.get(f"/ns/shop/workflows/order-1/runs/{run.run_id}/").content.decode()
    assert '<span class="badge status-Running">Running</span>' in listed
    assert '<span class="badge status-Running" id="run-status">Running</span>' in page
