"""The provisioning ``manage.py`` commands on real PostgreSQL: each verb's effect and audit
entry, refusals as a command error with nothing changed; the admin's read-only pages; and
an expiring key refused from its expiry on, the per-process key cache included."""

from __future__ import annotations

import io
import json
import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, override_settings
from django.utils import timezone

from chronicle.errors import ChronicleError
from executions.models import AuditAction, AuditEntry
from namespaces.auth import api_key_from_header, forget_resolved_keys
from namespaces.models import ApiKey, Membership, Namespace, OperatorKey, TaskQueueLimit
from tests.factories import ApiKeyFactory, NamespaceFactory, UserFactory

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def run_json(*args: str) -> Any:
    return json.loads(run(*args, "--json"))


def actions(namespace: Namespace) -> list[str]:
    return list(
        AuditEntry.objects.filter(namespace=namespace).order_by("id").values_list("action", flat=True)
    )


def test_namespace_create_update_list_describe_delete() -> None:
    created = run_json("namespace", "create", "shop", "--set", "retention_days=14", "--reason", "launch")
    assert created["settings"]["retention_days"] == 14
    ns = Namespace.objects.get(name="shop")
    entry = AuditEntry.objects.get(namespace=ns)
    assert entry.actor.startswith("manage.py (") and entry.reason == "launch"
    assert entry.details == {"operation": "namespace.create"}

    assert "retention_days: 14 -> 30" in run("namespace", "update", "shop", "--set", "retention_days=30")
    assert "shop" in [row["name"] for row in run_json("namespace", "list")["namespaces"]]
    assert run_json("namespace", "describe", "shop")["settings"]["retention_days"] == 30
    assert actions(ns) == [AuditAction.SETTINGS_CHANGE, AuditAction.SETTINGS_CHANGE]

    with pytest.raises(CommandError, match="type the namespace's name"):
        run("namespace", "delete", "shop", "--confirm", "shops")
    assert Namespace.objects.filter(name="shop").exists()
    assert "namespace shop deleted" in run("namespace", "delete", "shop", "--confirm", "shop")
    assert not Namespace.objects.filter(name="shop").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("namespace", "create", "a/b"),
        ("namespace", "create", "ok", "--set", "retention_days=0"),
        ("namespace", "create", "ok", "--set", "retention_days=many"),
        ("namespace", "create", "ok", "--set", "colour=red"),
        ("namespace", "create", "ok", "--set", "no-equals-sign"),
        ("namespace", "create", "ok", "--set", "history_count_warn=99999999"),
    ],
)
def test_bad_namespace_arguments_are_refused_and_create_nothing(args: tuple[str, ...]) -> None:
    before = Namespace.objects.count()
    with pytest.raises(CommandError):
        run(*args)
    assert Namespace.objects.count() == before


def test_update_refuses_bad_values_and_unknown_namespaces() -> None:
    ns = NamespaceFactory()
    with pytest.raises(CommandError):
        run("namespace", "update", ns.name, "--set", "payload_warn_bytes=999999999")
    with pytest.raises(CommandError, match="not found"):
        run("namespace", "update", "nowhere", "--set", "retention_days=5")
    ns.refresh_from_db()
    assert ns.payload_warn_bytes == 512 * 1024 and not actions(ns)


def test_api_key_create_list_revoke_rotate() -> None:
    ns = NamespaceFactory()
    created = run_json(
        "api_key", "create", "-n", ns.name, "--name", "w", "--role", "worker", "--role", "client"
    )
    raw = created["api_key"]
    assert api_key_from_header(f"Bearer {raw}").namespace == ns
    listed = run_json("api_key", "list", "-n", ns.name)["api_keys"]
    assert [row["name"] for row in listed] == ["w"] and "api_key" not in listed[0]
    key_id = str(created["key"]["id"])

    rotated = run_json("api_key", "rotate", "-n", ns.name, key_id, "--grace-seconds", "60")
    assert rotated["old_key"]["expires_at"] is not None
    assert api_key_from_header(f"Bearer {rotated['api_key']}").namespace == ns

    run("api_key", "revoke", "-n", ns.name, str(rotated["key"]["id"]))
    forget_resolved_keys()
    with pytest.raises(ChronicleError):
        api_key_from_header(f"Bearer {rotated['api_key']}")
    assert actions(ns) == [AuditAction.API_KEY_CREATE, AuditAction.API_KEY_CREATE, AuditAction.API_KEY_REVOKE]

    with pytest.raises(CommandError, match="no such API key"):
        run("api_key", "revoke", "-n", ns.name, "999999")
    with pytest.raises(CommandError, match="ISO 8601"):
        run("api_key", "create", "-n", ns.name, "--name", "x", "--role", "client", "--expires-at", "tomorrow")
    assert ApiKey.objects.filter(namespace=ns).count() == 2


def test_member_grant_new_user_list_revoke() -> None:
    ns = NamespaceFactory()
    user = UserFactory()
    run("member", "grant", "-n", ns.name, user.username, "--role", "admin")
    made = run_json("member", "grant", "-n", ns.name, "carol", "--role", "viewer", "--new-user")
    assert get_user_model().objects.get(username="carol").check_password(made["one_time_password"])
    members = run_json("member", "list", "-n", ns.name)["members"]
    assert {(m["username"], m["role"]) for m in members} == {(user.username, "admin"), ("carol", "viewer")}
    run("member", "revoke", "-n", ns.name, "carol")
    assert not Membership.objects.filter(namespace=ns, user__username="carol").exists()
    with pytest.raises(CommandError, match="last admin"):
        run("member", "revoke", "-n", ns.name, user.username)
    with pytest.raises(CommandError, match="there is no user"):
        run("member", "grant", "-n", ns.name, "ghost", "--role", "viewer")
    assert actions(ns) == [AuditAction.MEMBER_CHANGE] * 3


def test_queue_limit_set_list_remove() -> None:
    ns = NamespaceFactory()
    run("queue_limit", "set", "-n", ns.name, "orders", "12.5")
    assert run_json("queue_limit", "list", "-n", ns.name)["task_queue_limits"] == [
        {"task_queue": "orders", "dispatch_rps": 12.5}
    ]
    with pytest.raises(CommandError):
        run("queue_limit", "set", "-n", ns.name, "orders", "-3")
    assert TaskQueueLimit.objects.get(namespace=ns).dispatch_rps == 12.5
    run("queue_limit", "remove", "-n", ns.name, "orders")
    assert not TaskQueueLimit.objects.filter(namespace=ns).exists()
    assert actions(ns) == [AuditAction.RATE_LIMIT_CHANGE] * 2


def test_operator_key_only_for_an_active_superuser() -> None:
    with pytest.raises(CommandError, match="not an active superuser"):
        run("operator_key", "create", "--username", UserFactory().username)
    boss = UserFactory(is_superuser=True)
    made = run_json("operator_key", "create", "--username", boss.username)
    assert made["operator_key"].startswith("chrop_")
    assert [row["id"] for row in run_json("operator_key", "list")["operator_keys"]] == [made["id"]]
    run("operator_key", "revoke", str(made["id"]))
    assert OperatorKey.objects.get(pk=made["id"]).revoked_at is not None
    assert OperatorKey.objects.count() == 1


@override_settings(CHRONICLE_API_KEY_CACHE_SECONDS=30)
def test_a_cached_key_is_refused_from_its_expiry_on() -> None:
    key = ApiKeyFactory(namespace=NamespaceFactory())
    ApiKey.objects.filter(pk=key.api_key.pk).update(expires_at=timezone.now() + timedelta(seconds=0.5))
    forget_resolved_keys()
    assert api_key_from_header(key.authorization).pk == key.api_key.pk  # now cached
    time.sleep(0.6)
    with pytest.raises(ChronicleError, match="expired"):
        api_key_from_header(key.authorization)


def test_the_admin_shows_the_tenancy_models_read_only() -> None:
    ns = NamespaceFactory()
    key = ApiKeyFactory(namespace=ns)
    boss = UserFactory(is_superuser=True, is_staff=True)
    client = Client()
    client.force_login(boss)
    for model in ("namespace", "apikey", "membership", "operatorkey", "taskqueuelimit"):
        assert client.get(f"/admin/namespaces/{model}/").status_code == 200, model
        assert client.get(f"/admin/namespaces/{model}/add/").status_code == 403, model
    page = client.get(f"/admin/namespaces/apikey/{key.api_key.pk}/change/")
    assert page.status_code == 200
    assert key.api_key.key_hash not in page.content.decode()
    posted = client.post(f"/admin/namespaces/namespace/{ns.pk}/change/", {"name": "renamed"})
    assert posted.status_code == 403
    assert Namespace.objects.get(pk=ns.pk).name == ns.name
