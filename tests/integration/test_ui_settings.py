"""Namespace settings pages through Django's test client on real PostgreSQL: each page and
change, each role, cross-tenant 404s, validation that changes nothing, and the audit log."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from chronicle.errors import ChronicleError
from executions.models import AuditEntry
from namespaces.auth import access_namespace, api_key_from_header
from namespaces.models import ApiKey, MemberRole, Membership, Namespace, SearchAttribute, TaskQueueLimit
from namespaces.rate_limits import bucket_counts, request_bucket_key, take_token
from namespaces.services import api_key_issue
from tests.factories import MembershipFactory, NamespaceFactory, UserFactory

pytestmark = pytest.mark.django_db

PAGES = ("", "rate-limits/", "search-attributes/", "members/", "api-keys/")


def signed_in(namespace: Namespace, role: str) -> Client:
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=role).user)
    return client


def url(namespace: Namespace, page: str = "") -> str:
    return f"/ns/{namespace.name}/settings/{page}"


def post(client: Client, namespace: Namespace, page: str, **fields: Any) -> Any:
    return client.post(url(namespace, page), {"reason": "tuning", **fields})


def rate_fields(namespace: Namespace, **changes: Any) -> dict[str, Any]:
    values = {
        name: getattr(namespace, name) for name in ("request_rps", "request_burst_ratio", "dispatch_rps")
    }
    return {"form": "namespace", **values, **changes}


def test_every_page_opens_for_an_admin_and_is_a_404_for_a_non_member() -> None:
    ns = NamespaceFactory()
    admin, outsider = signed_in(ns, MemberRole.ADMIN), signed_in(NamespaceFactory(), MemberRole.ADMIN)
    for page in PAGES:
        assert admin.get(url(ns, page)).status_code == 200, page
        assert outsider.get(url(ns, page)).status_code == 404, page
        assert outsider.post(url(ns, page), {"reason": "x"}).status_code == 404, page


def test_members_read_settings_but_only_admins_see_members_and_keys() -> None:
    ns = NamespaceFactory()
    for role in (MemberRole.VIEWER, MemberRole.OPERATOR):
        client = signed_in(ns, role)
        page = client.get(url(ns, "rate-limits/")).content.decode()
        assert "Save rate limits" not in page and 'id="effective-request-rps"' in page
        assert re.search(r'name="request_rps"[^>]*disabled', page)
        assert client.get(url(ns)).status_code == 200
        assert client.get(url(ns, "members/")).status_code == 403
        assert client.get(url(ns, "api-keys/")).status_code == 403
        assert post(client, ns, "rate-limits/", **rate_fields(ns, request_rps=1)).status_code == 403
    assert Namespace.objects.get(pk=ns.pk).request_rps == ns.request_rps
    assert not AuditEntry.objects.exists()


def test_an_admin_changes_the_request_rate_and_the_change_is_audited_old_to_new() -> None:
    ns = NamespaceFactory(request_rps=2400.0)
    admin = signed_in(ns, MemberRole.ADMIN)
    response = post(admin, ns, "rate-limits/", **rate_fields(ns, request_rps=750), request_id="r-1")
    assert response.status_code == 302
    assert Namespace.objects.get(pk=ns.pk).request_rps == 750.0
    page = admin.get(url(ns, "rate-limits/")).content.decode()
    effective = re.search(r'id="effective-request-rps">([^<]*)<', page)
    assert effective is not None and effective.group(1).startswith("750/s")
    assert "namespace setting" in page
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target, entry.reason) == ("rate_limit.change", "namespace", "tuning")
    assert entry.old == {"request_rps": 2400.0} and entry.new == {"request_rps": 750.0}
    # The same form again (same request id) records and changes nothing more.
    assert (
        post(admin, ns, "rate-limits/", **rate_fields(ns, request_rps=5), request_id="r-1").status_code == 302
    )
    assert Namespace.objects.get(pk=ns.pk).request_rps == 750.0 and AuditEntry.objects.count() == 1


def test_a_lowered_rate_throttles_the_api_and_the_counts_show_it() -> None:
    ns = NamespaceFactory(request_rps=2400.0)
    _, raw = api_key_issue(namespace=ns, name="w", roles=["client"])
    admin = signed_in(ns, MemberRole.ADMIN)
    assert (
        post(admin, ns, "rate-limits/", **rate_fields(ns, request_rps=1, request_burst_ratio=1)).status_code
        == 302
    )
    key = api_key_from_header(f"Bearer {raw}")
    access_namespace(key, ns.name, "client")
    with pytest.raises(ChronicleError) as throttled:
        access_namespace(key, ns.name, "client")
    assert throttled.value.status == 429
    counts = admin.get(url(ns, "rate-limits/counts/")).json()
    assert counts["effective_request_rps"] == 1.0
    assert counts["buckets"][request_bucket_key(ns.id)] == {"granted": 1, "throttled": 1}


def test_bad_values_are_refused_with_a_400_and_change_nothing() -> None:
    ns = NamespaceFactory(request_rps=100.0, history_count_warn=10, history_count_limit=20)
    admin = signed_in(ns, MemberRole.ADMIN)
    for fields in (
        rate_fields(ns, request_rps=0),
        rate_fields(ns, request_rps="fast"),
        rate_fields(ns, dispatch_rps=-1),
    ):
        assert post(admin, ns, "rate-limits/", **fields).status_code == 400
    missing_reason = admin.post(url(ns, "rate-limits/"), rate_fields(ns, request_rps=5))
    assert missing_reason.status_code == 400 and b"a reason is required" in missing_reason.content
    general = {name: getattr(ns, name) for name in ("retention_days", "history_count_limit")}
    page = admin.get(url(ns)).content.decode()
    values = dict(re.findall(r'name="([a-z_]+)" value="([^"]*)"', page))
    assert general["retention_days"] == int(values["retention_days"])
    refused = post(admin, ns, "", **{**values, "history_count_warn": 30})
    assert refused.status_code == 400 and b"must not be larger than history count limit" in refused.content
    stored = Namespace.objects.get(pk=ns.pk)
    assert (stored.request_rps, stored.history_count_warn, stored.dispatch_rps) == (100.0, 10, 0.0)
    assert not AuditEntry.objects.exists()


def test_general_settings_save_what_changed() -> None:
    ns = NamespaceFactory(retention_days=3)
    admin = signed_in(ns, MemberRole.ADMIN)
    values = dict(re.findall(r'name="([a-z_]+)" value="([^"]*)"', admin.get(url(ns)).content.decode()))
    values.pop("request_id", None)
    assert post(admin, ns, "", **{**values, "retention_days": 30}).status_code == 302
    assert Namespace.objects.get(pk=ns.pk).retention_days == 30
    entry = AuditEntry.objects.get()
    assert (
        entry.action == "settings.change"
        and entry.old == {"retention_days": 3}
        and entry.new == {"retention_days": 30}
    )


def test_task_queue_limits_are_set_shown_with_their_source_and_removed() -> None:
    ns = NamespaceFactory(dispatch_rps=5.0)
    admin = signed_in(ns, MemberRole.ADMIN)
    assert (
        post(admin, ns, "rate-limits/", form="queue", task_queue="orders", dispatch_rps="20").status_code
        == 302
    )
    assert TaskQueueLimit.objects.get(namespace=ns).dispatch_rps == 20.0
    page = admin.get(url(ns, "rate-limits/")).content.decode()
    assert "Task dispatches on orders" in page and "namespace limit (shared by all its queues)" in page
    assert (
        post(admin, ns, "rate-limits/", form="queue", task_queue="orders", dispatch_rps="").status_code == 302
    )
    assert not TaskQueueLimit.objects.exists()
    changes = [(e.old, e.new) for e in AuditEntry.objects.order_by("id")]
    assert changes == [({"orders": None}, {"orders": 20.0}), ({"orders": 20.0}, {"orders": None})]


def test_search_attributes_are_registered_by_admins_only() -> None:
    ns = NamespaceFactory()
    admin, operator = signed_in(ns, MemberRole.ADMIN), signed_in(ns, MemberRole.OPERATOR)
    assert post(operator, ns, "search-attributes/", name="CustomerId", type="Keyword").status_code == 403
    assert post(admin, ns, "search-attributes/", name="CustomerId", type="Keyword").status_code == 302
    assert post(admin, ns, "search-attributes/", name="WorkflowId", type="Keyword").status_code == 400
    assert post(admin, ns, "search-attributes/", name="CustomerId", type="Int").status_code == 400
    assert list(SearchAttribute.objects.values_list("name", "type")) == [("CustomerId", "Keyword")]
    assert "CustomerId" in operator.get(url(ns, "search-attributes/")).content.decode()
    assert AuditEntry.objects.get().action == "search_attribute.add"


def test_members_are_added_changed_and_removed_but_the_last_admin_stays() -> None:
    ns = NamespaceFactory()
    admin_membership = MembershipFactory(namespace=ns, role=MemberRole.ADMIN)
    admin = Client()
    admin.force_login(admin_membership.user)
    newcomer = UserFactory()
    assert post(admin, ns, "members/", username=newcomer.username, role="operator").status_code == 302
    assert post(admin, ns, "members/", username=newcomer.username, role="viewer").status_code == 302
    assert Membership.objects.get(user=newcomer).role == "viewer"
    assert post(admin, ns, "members/", username="nobody", role="viewer").status_code == 400
    last = post(admin, ns, "members/", username=admin_membership.user.username, role="viewer")
    assert last.status_code == 400 and b"last admin" in last.content
    assert post(admin, ns, "members/", username=newcomer.username, role="").status_code == 302
    assert not Membership.objects.filter(user=newcomer).exists()
    assert Membership.objects.get(user=admin_membership.user).role == "admin"
    assert [(e.old, e.new) for e in AuditEntry.objects.order_by("id")] == [
        ({newcomer.username: None}, {newcomer.username: "operator"}),
        ({newcomer.username: "operator"}, {newcomer.username: "viewer"}),
        ({newcomer.username: "viewer"}, {newcomer.username: None}),
    ]


def test_an_api_key_is_shown_once_and_a_revoked_key_is_refused() -> None:
    ns = NamespaceFactory()
    admin = signed_in(ns, MemberRole.ADMIN)
    created = post(admin, ns, "api-keys/", name="ci", roles=["client", "worker"])
    assert created.status_code == 200
    shown = re.search(r'<pre id="new-api-key">([^<]+)</pre>', created.content.decode())
    assert shown is not None
    raw = shown.group(1)
    assert raw not in admin.get(url(ns, "api-keys/")).content.decode()
    entry = AuditEntry.objects.get()
    assert raw not in str(entry.old) + str(entry.new) + entry.details.__repr__()
    key = ApiKey.objects.get(namespace=ns)
    assert api_key_from_header(f"Bearer {raw}").pk == key.pk and key.roles == ["client", "worker"]

    assert post(admin, ns, "api-keys/", form="revoke", key_id=str(key.pk)).status_code == 302
    with pytest.raises(ChronicleError) as refused:
        api_key_from_header(f"Bearer {raw}")
    assert refused.value.status == 401
    other = ApiKey.objects.create(
        namespace=NamespaceFactory(), name="x", prefix="p", key_hash="h" * 64, roles=[]
    )
    assert post(admin, ns, "api-keys/", form="revoke", key_id=str(other.pk)).status_code == 400
    assert ApiKey.objects.get(pk=other.pk).revoked_at is None


def test_rate_counts_are_for_members_only() -> None:
    ns = NamespaceFactory()
    take_token(request_bucket_key(ns.id), rate=10, burst=10)
    assert bucket_counts([request_bucket_key(ns.id)]) == {request_bucket_key(ns.id): (1, 0)}
    assert signed_in(ns, MemberRole.VIEWER).get(url(ns, "rate-limits/counts/")).status_code == 200
    assert (
        signed_in(NamespaceFactory(), MemberRole.ADMIN).get(url(ns, "rate-limits/counts/")).status_code == 404
    )
