"""The provisioning REST API on real PostgreSQL: each endpoint's success and audit entry,
bad input refused with nothing changed, another namespace's key 404, a wrong role 403,
and revoked or expired keys (operator or namespace) refused."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from executions.models import AuditAction, AuditEntry
from namespaces.models import ApiKey, MemberRole, Membership, Namespace, OperatorKey, Role, TaskQueueLimit
from namespaces.operator_keys import operator_key_issue
from tests.asgi_client import asgi_request
from tests.factories import ApiKeyFactory, NamespaceFactory, UserFactory

pytestmark = pytest.mark.django_db

API = "/api/v1/namespaces"


class Http:
    """JSON calls with one bearer header."""

    def __init__(self, authorization: str | None) -> None:
        self.client = Client()
        self.headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, **query: str) -> Any:
        send = getattr(self.client, method.lower())
        if method == "GET":
            return send(path, query, **self.headers)
        if method == "DELETE":
            return send(f"{path}?{urlencode(query)}", **self.headers)
        return send(path, json.dumps(body or {}), content_type="application/json", **self.headers)


@pytest.fixture
def operator() -> Http:
    user = UserFactory(is_superuser=True, is_staff=True)
    _, raw = operator_key_issue(username=user.username, name="ops")
    return Http(f"Bearer {raw}")


@pytest.fixture
def tenant() -> Namespace:
    return NamespaceFactory()


@pytest.fixture
def admin(tenant: Namespace) -> Http:
    return Http(ApiKeyFactory(namespace=tenant, roles=[Role.ADMIN]).authorization)


@pytest.fixture
def client_key(tenant: Namespace) -> Http:
    return Http(ApiKeyFactory(namespace=tenant, roles=[Role.CLIENT, Role.WORKER]).authorization)


@pytest.fixture
def stranger() -> Http:
    """An admin key of another namespace."""
    return Http(ApiKeyFactory(namespace=NamespaceFactory(), roles=[Role.ADMIN]).authorization)


def entries(namespace: Namespace, action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(namespace=namespace, action=action).order_by("id"))


# -- namespaces ----------------------------------------------------------------------------


def test_an_operator_creates_a_namespace_with_settings_and_it_is_audited(operator: Http) -> None:
    r = operator.call(
        "POST", API, {"name": "acme", "retention_days": 7, "request_rps": 50, "reason": "new customer"}
    )
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["name"] == "acme" and body["settings"]["retention_days"] == 7
    ns = Namespace.objects.get(name="acme")
    assert (ns.retention_days, ns.request_rps) == (7, 50.0)
    [entry] = entries(ns, AuditAction.SETTINGS_CHANGE)
    assert entry.details == {"operation": "namespace.create"}
    assert entry.new["namespace"] == "acme" and entry.new["retention_days"] == 7
    assert entry.reason == "new customer" and "operator key" in entry.actor


@pytest.mark.parametrize(
    "body",
    [
        {"name": "bad/name"},
        {"name": ".hidden"},
        {"name": ""},
        {"name": 7},
        {"name": "ok", "retention_days": 0},
        {"name": "ok", "retention_days": -1},
        {"name": "ok", "history_count_warn": 60_000},  # above the limit it warns of
        {"name": "ok", "request_rps": 0},
        {"name": "ok", "retention_dayz": 3},  # a misspelt setting is refused, not ignored
        {"name": "ok", "request_rps": "lots"},
    ],
)
def test_bad_namespace_input_is_a_400_and_creates_nothing(operator: Http, body: dict[str, Any]) -> None:
    before = Namespace.objects.count()
    r = operator.call("POST", API, body)
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "invalid_argument"
    assert Namespace.objects.count() == before
    assert not AuditEntry.objects.filter(details__operation="namespace.create").exists()


def test_a_taken_name_is_a_400(operator: Http, tenant: Namespace) -> None:
    r = operator.call("POST", API, {"name": tenant.name})
    assert r.status_code == 400 and "already exists" in r.json()["message"]


def test_namespace_keys_cannot_create_list_or_delete_namespaces(admin: Http, tenant: Namespace) -> None:
    assert admin.call("POST", API, {"name": "mine"}).status_code == 403
    assert admin.call("GET", API).status_code == 403
    assert admin.call("DELETE", f"{API}/{tenant.name}", confirm=tenant.name).status_code == 403
    assert not Namespace.objects.filter(name="mine").exists()
    assert Namespace.objects.filter(pk=tenant.pk).exists()
    assert Http(None).call("GET", API).status_code == 401


def test_an_operator_lists_every_namespace(operator: Http, tenant: Namespace) -> None:
    r = operator.call("GET", API)
    assert r.status_code == 200
    assert tenant.name in [row["name"] for row in r.json()["namespaces"]]


def test_describe_for_the_operator_and_the_namespaces_own_admin_only(
    operator: Http, admin: Http, client_key: Http, stranger: Http, tenant: Namespace
) -> None:
    TaskQueueLimit.objects.create(namespace=tenant, task_queue="q", dispatch_rps=3)
    for caller in (operator, admin):
        r = caller.call("GET", f"{API}/{tenant.name}")
        assert r.status_code == 200, r.content
        assert r.json()["task_queue_limits"] == [{"task_queue": "q", "dispatch_rps": 3.0}]
    assert stranger.call("GET", f"{API}/{tenant.name}").json()["code"] == "not_found"
    assert client_key.call("GET", f"{API}/{tenant.name}").status_code == 403
    assert operator.call("GET", f"{API}/no-such-namespace").status_code == 404


def test_an_admin_key_updates_its_namespace_and_the_change_is_audited(admin: Http, tenant: Namespace) -> None:
    r = admin.call("PATCH", f"{API}/{tenant.name}", {"retention_days": 30, "reason": "compliance"})
    assert r.status_code == 200, r.content
    assert r.json()["changed"] == {"retention_days": {"old": 3, "new": 30}}
    tenant.refresh_from_db()
    assert tenant.retention_days == 30
    [entry] = entries(tenant, AuditAction.SETTINGS_CHANGE)
    assert (entry.old, entry.new, entry.reason) == (
        {"retention_days": 3},
        {"retention_days": 30},
        "compliance",
    )
    assert entry.actor.startswith("api key ")

    rates = admin.call("PATCH", f"{API}/{tenant.name}", {"request_rps": 10, "dispatch_rps": 5})
    assert rates.status_code == 200
    assert len(entries(tenant, AuditAction.RATE_LIMIT_CHANGE)) == 1


@pytest.mark.parametrize(
    "body",
    [{"retention_days": 0}, {"payload_warn_bytes": 10**9}, {"request_burst_ratio": 0.5}, {"colour": "red"}],
)
def test_a_bad_update_is_a_400_and_changes_nothing(
    admin: Http, tenant: Namespace, body: dict[str, Any]
) -> None:
    before = Namespace.objects.values().get(pk=tenant.pk)
    r = admin.call("PATCH", f"{API}/{tenant.name}", body)
    assert r.status_code == 400, r.content
    assert Namespace.objects.values().get(pk=tenant.pk) == before
    assert not AuditEntry.objects.filter(namespace=tenant).exists()


def test_update_by_other_namespaces_key_is_404_and_by_a_client_key_403(
    stranger: Http, client_key: Http, tenant: Namespace
) -> None:
    assert stranger.call("PATCH", f"{API}/{tenant.name}", {"retention_days": 9}).status_code == 404
    assert client_key.call("PATCH", f"{API}/{tenant.name}", {"retention_days": 9}).status_code == 403
    tenant.refresh_from_db()
    assert tenant.retention_days == 3


def test_delete_needs_the_name_confirmed(operator: Http, tenant: Namespace) -> None:
    ApiKeyFactory(namespace=tenant)
    wrong = operator.call("DELETE", f"{API}/{tenant.name}", confirm="something-else")
    assert wrong.status_code == 400
    assert operator.call("DELETE", f"{API}/{tenant.name}").status_code == 400
    assert Namespace.objects.filter(pk=tenant.pk).exists()

    r = operator.call("DELETE", f"{API}/{tenant.name}", confirm=tenant.name, reason="churned")
    assert r.status_code == 200, r.content
    assert r.json()["removed"]["namespaces.ApiKey"] == 1
    assert not Namespace.objects.filter(pk=tenant.pk).exists()
    assert operator.call("DELETE", f"{API}/{tenant.name}", confirm=tenant.name).status_code == 404


# -- API keys ------------------------------------------------------------------------------


def test_an_admin_creates_a_key_shown_once_that_authenticates(admin: Http, tenant: Namespace) -> None:
    r = admin.call("POST", f"{API}/{tenant.name}/api-keys", {"name": "ci", "roles": ["client"]})
    assert r.status_code == 201, r.content
    raw = r.json()["api_key"]
    assert raw.startswith("chr_") and r.json()["key"]["roles"] == ["client"]
    new = Http(f"Bearer {raw}")
    assert new.call("GET", f"{API}/{tenant.name}/workflows").status_code == 200
    [entry] = entries(tenant, AuditAction.API_KEY_CREATE)
    assert raw not in json.dumps([entry.old, entry.new, entry.details])
    listed = admin.call("GET", f"{API}/{tenant.name}/api-keys").json()["api_keys"]
    assert "ci" in [row["name"] for row in listed]
    assert all("api_key" not in row and "key_hash" not in row for row in listed)


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "roles": []},
        {"name": "x", "roles": ["root"]},
        {"name": "", "roles": ["client"]},
        {"name": "x", "roles": ["client"], "expires_at": "2001-01-01T00:00:00Z"},
        {"name": "x", "roles": "client"},
    ],
)
def test_bad_key_input_is_a_400_and_issues_nothing(
    admin: Http, tenant: Namespace, body: dict[str, Any]
) -> None:
    before = ApiKey.objects.filter(namespace=tenant).count()
    assert admin.call("POST", f"{API}/{tenant.name}/api-keys", body).status_code == 400
    assert ApiKey.objects.filter(namespace=tenant).count() == before
    assert not entries(tenant, AuditAction.API_KEY_CREATE)


def test_keys_of_another_namespace_or_without_admin_are_refused(
    stranger: Http, client_key: Http, tenant: Namespace
) -> None:
    path = f"{API}/{tenant.name}/api-keys"
    assert stranger.call("GET", path).status_code == 404
    assert stranger.call("POST", path, {"name": "x", "roles": ["admin"]}).status_code == 404
    assert client_key.call("POST", path, {"name": "x", "roles": ["admin"]}).status_code == 403
    assert not ApiKey.objects.filter(namespace=tenant, name="x").exists()


def test_revoke_refuses_the_key_at_once(admin: Http, tenant: Namespace) -> None:
    victim = ApiKeyFactory(namespace=tenant, roles=[Role.CLIENT])
    r = admin.call("POST", f"{API}/{tenant.name}/api-keys/{victim.api_key.pk}/revoke", {"reason": "leaked"})
    assert r.status_code == 200 and r.json()["state"] == "revoked"
    assert Http(victim.authorization).call("GET", f"{API}/{tenant.name}/workflows").status_code == 401
    [entry] = entries(tenant, AuditAction.API_KEY_REVOKE)
    assert entry.reason == "leaked"
    again = admin.call("POST", f"{API}/{tenant.name}/api-keys/{victim.api_key.pk}/revoke")
    assert again.status_code == 200 and len(entries(tenant, AuditAction.API_KEY_REVOKE)) == 1
    assert admin.call("POST", f"{API}/{tenant.name}/api-keys/abc/revoke").status_code == 400
    other = ApiKeyFactory(namespace=NamespaceFactory())
    assert admin.call("POST", f"{API}/{tenant.name}/api-keys/{other.api_key.pk}/revoke").status_code == 400
    assert ApiKey.objects.get(pk=other.api_key.pk).revoked_at is None


def test_rotate_gives_a_new_key_and_the_old_one_a_grace_period(admin: Http, tenant: Namespace) -> None:
    old = ApiKeyFactory(namespace=tenant, roles=[Role.CLIENT, Role.WORKER])
    r = admin.call("POST", f"{API}/{tenant.name}/api-keys/{old.api_key.pk}/rotate", {"grace_seconds": 3600})
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["key"]["roles"] == ["client", "worker"] and body["key"]["name"] == old.api_key.name
    expires = ApiKey.objects.get(pk=old.api_key.pk).expires_at
    assert expires is not None and timedelta(minutes=59) < expires - timezone.now() <= timedelta(hours=1)
    for authorization in (old.authorization, f"Bearer {body['api_key']}"):
        assert Http(authorization).call("GET", f"{API}/{tenant.name}/workflows").status_code == 200
    [entry] = entries(tenant, AuditAction.API_KEY_CREATE)
    assert entry.details["operation"] == "api_key.rotate"

    now = admin.call("POST", f"{API}/{tenant.name}/api-keys/{body['key']['id']}/rotate", {"grace_seconds": 0})
    assert now.status_code == 201
    assert Http(f"Bearer {body['api_key']}").call("GET", f"{API}/{tenant.name}/workflows").status_code == 401


def test_rotate_refuses_a_revoked_key_or_a_bad_grace(admin: Http, tenant: Namespace) -> None:
    key = ApiKeyFactory(namespace=tenant)
    path = f"{API}/{tenant.name}/api-keys/{key.api_key.pk}/rotate"
    assert admin.call("POST", path, {"grace_seconds": -1}).status_code == 400
    ApiKey.objects.filter(pk=key.api_key.pk).update(revoked_at=timezone.now())
    assert admin.call("POST", path).status_code == 400
    assert ApiKey.objects.filter(namespace=tenant).count() == 2  # the admin's and the revoked one


# -- credentials refused -------------------------------------------------------------------


def test_revoked_and_expired_admin_keys_are_refused(tenant: Namespace) -> None:
    revoked = ApiKeyFactory(namespace=tenant, roles=[Role.ADMIN])
    ApiKey.objects.filter(pk=revoked.api_key.pk).update(revoked_at=timezone.now())
    expired = ApiKeyFactory(namespace=tenant, roles=[Role.ADMIN])
    ApiKey.objects.filter(pk=expired.api_key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for key in (revoked, expired):
        r = Http(key.authorization).call("GET", f"{API}/{tenant.name}/api-keys")
        assert r.status_code == 401, r.content


def test_operator_keys_stop_with_revocation_expiry_or_the_users_superuser_status(tenant: Namespace) -> None:
    user = UserFactory(is_superuser=True)
    keys = [operator_key_issue(username=user.username, name=f"k{i}") for i in range(3)]
    (revoked, _), (expired, _), (_, live) = keys
    OperatorKey.objects.filter(pk=revoked.pk).update(revoked_at=timezone.now())
    OperatorKey.objects.filter(pk=expired.pk).update(expires_at=timezone.now())
    for _, raw in keys[:2]:
        assert Http(f"Bearer {raw}").call("GET", API).status_code == 401
    assert Http(f"Bearer {live}").call("GET", API).status_code == 200
    get_user_model().objects.filter(pk=user.pk).update(is_superuser=False)
    assert Http(f"Bearer {live}").call("GET", API).status_code == 401


def test_an_operator_key_is_no_namespace_key_on_the_other_apis(operator: Http, tenant: Namespace) -> None:
    r = operator.call("GET", f"{API}/{tenant.name}/workflows")
    assert r.status_code == 401


# -- members and queue limits ----------------------------------------------------------------


def test_members_grant_list_revoke_audited(admin: Http, tenant: Namespace) -> None:
    boss, dev = UserFactory(), UserFactory()
    Membership.objects.create(namespace=tenant, user=boss, role=MemberRole.ADMIN)
    path = f"{API}/{tenant.name}/members"
    r = admin.call("POST", path, {"username": dev.username, "role": "operator", "reason": "on call"})
    assert r.status_code == 200, r.content
    assert r.json()["changed"] == {dev.username: {"old": None, "new": "operator"}}
    listed = admin.call("GET", path).json()["members"]
    assert {"username": dev.username, "role": "operator"} in listed
    gone = admin.call("DELETE", f"{path}/{dev.username}", reason="left")
    assert gone.status_code == 200
    assert not Membership.objects.filter(namespace=tenant, user=dev).exists()
    assert [e.new for e in entries(tenant, AuditAction.MEMBER_CHANGE)] == [
        {dev.username: "operator"},
        {dev.username: None},
    ]
    assert admin.call("DELETE", f"{path}/{dev.username}").status_code == 404
    last_admin = admin.call("DELETE", f"{path}/{boss.username}")
    assert last_admin.status_code == 400
    assert Membership.objects.filter(namespace=tenant, user=boss).exists()


@pytest.mark.parametrize(
    "body",
    [
        {"username": "nobody-here", "role": "viewer"},
        {"username": "x", "role": "emperor"},
        {"username": "", "role": "viewer"},
    ],
)
def test_bad_member_input_is_a_400(admin: Http, tenant: Namespace, body: dict[str, Any]) -> None:
    assert admin.call("POST", f"{API}/{tenant.name}/members", body).status_code == 400
    assert not Membership.objects.filter(namespace=tenant).exists()


def test_a_new_person_gets_an_account_with_a_one_time_password(admin: Http, tenant: Namespace) -> None:
    body = {"username": "newbie", "role": "viewer", "new_user": True, "email": "newbie@example.com"}
    r = admin.call("POST", f"{API}/{tenant.name}/members", body)
    assert r.status_code == 201, r.content
    password = r.json()["one_time_password"]
    user = get_user_model().objects.get(username="newbie")
    assert user.check_password(password) and not user.is_staff and not user.is_superuser
    assert Membership.objects.get(namespace=tenant, user=user).role == "viewer"
    [entry] = entries(tenant, AuditAction.MEMBER_CHANGE)
    assert entry.details == {"operation": "user.create"} and password not in json.dumps(entry.new)
    assert Client().login(username="newbie", password=password)

    taken = admin.call("POST", f"{API}/{tenant.name}/members", body)
    assert taken.status_code == 400
    bad = admin.call("POST", f"{API}/{tenant.name}/members", {**body, "username": "no spaces!"})
    assert bad.status_code == 400
    assert not get_user_model().objects.filter(username="no spaces!").exists()


def test_members_refused_to_strangers_and_non_admins(
    stranger: Http, client_key: Http, tenant: Namespace
) -> None:
    user = UserFactory()
    body = {"username": user.username, "role": "admin"}
    assert stranger.call("POST", f"{API}/{tenant.name}/members", body).status_code == 404
    assert client_key.call("POST", f"{API}/{tenant.name}/members", body).status_code == 403
    assert client_key.call("GET", f"{API}/{tenant.name}/members").status_code == 403
    assert not Membership.objects.filter(namespace=tenant).exists()


def test_queue_limits_set_list_remove_audited(admin: Http, stranger: Http, tenant: Namespace) -> None:
    path = f"{API}/{tenant.name}/task-queues/orders/limits"
    r = admin.call("PUT", path, {"dispatch_rps": 20})
    assert r.status_code == 200, r.content
    assert TaskQueueLimit.objects.get(namespace=tenant, task_queue="orders").dispatch_rps == 20
    listed = admin.call("GET", f"{API}/{tenant.name}/task-queue-limits").json()
    assert listed == {"task_queue_limits": [{"task_queue": "orders", "dispatch_rps": 20.0}]}
    for bad in ({"dispatch_rps": -1}, {"dispatch_rps": "fast"}, {}):
        assert admin.call("PUT", path, bad).status_code == 400
    assert stranger.call("PUT", path, {"dispatch_rps": 1}).status_code == 404
    assert TaskQueueLimit.objects.get(namespace=tenant, task_queue="orders").dispatch_rps == 20
    assert admin.call("DELETE", path).status_code == 200
    assert not TaskQueueLimit.objects.filter(namespace=tenant).exists()
    assert len(entries(tenant, AuditAction.RATE_LIMIT_CHANGE)) == 2


def test_the_schema_describes_the_provisioning_endpoints() -> None:
    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operations = {
        op["operationId"] for path in schema["paths"].values() for op in path.values() if isinstance(op, dict)
    }
    assert {
        "create_namespace",
        "list_namespaces",
        "describe_namespace",
        "update_namespace",
        "delete_namespace",
        "create_api_key",
        "list_api_keys",
        "revoke_api_key",
        "rotate_api_key",
        "grant_member",
        "list_members",
        "revoke_member",
        "set_task_queue_limit",
        "list_task_queue_limits",
    } <= operations
    create = schema["paths"]["/api/v1/namespaces"]["post"]
    body = create["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert {"name", "retention_days", "request_rps"} <= set(
        schema["components"]["schemas"][body]["properties"]
    )


@pytest.mark.django_db(transaction=True)
def test_the_frontends_asgi_app_routes_every_provisioning_path_past_the_lean_lane() -> None:
    """Through ``chronicle.asgi.application`` (the lane in front of Django): each path
    reaches its provisioning view; none is taken by a lane route."""
    tenant = NamespaceFactory()
    admin_key = ApiKeyFactory(namespace=tenant, roles=[Role.ADMIN])
    user = UserFactory(is_superuser=True)
    _, operator_raw = operator_key_issue(username=user.username, name="asgi")
    ns = f"{API}/{tenant.name}"
    as_admin = {"authorization": admin_key.authorization}
    assert asgi_request("GET", API, authorization=f"Bearer {operator_raw}").status_code == 200
    assert asgi_request("GET", ns, **as_admin).json()["name"] == tenant.name
    assert "api_keys" in asgi_request("GET", f"{ns}/api-keys", **as_admin).json()
    assert asgi_request("GET", f"{ns}/members", **as_admin).json() == {"members": []}
    limit = asgi_request(
        "PUT", f"{ns}/task-queues/orders/limits", json.dumps({"dispatch_rps": 4}), **as_admin
    )
    assert limit.status_code == 200, limit.content
    assert TaskQueueLimit.objects.get(namespace=tenant, task_queue="orders").dispatch_rps == 4
    assert (
        asgi_request("GET", f"{ns}/task-queue-limits", **as_admin).json()["task_queue_limits"][0][
            "task_queue"
        ]
        == "orders"
    )
