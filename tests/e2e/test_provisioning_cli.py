"""``chronicle namespace|key|member`` run as a user runs them (a subprocess) against the real
stack: an operator key makes a namespace and its first key, that key (admin) takes over
its members and keys, and refusals end with the exit codes a script tests."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from namespaces.operator_keys import operator_key_issue
from tests.conftest import Stack
from tests.e2e.test_cli_support import chronicle, cli_env, ok_json
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def operator_env(stack: Stack, django_db_blocker: Any) -> dict[str, str]:
    with django_db_blocker.unblock():
        user = UserFactory(is_superuser=True)
        _, raw = operator_key_issue(username=user.username, name="cli")
    return cli_env(stack, None, CHRONICLE_API_KEY=raw)


def test_an_operator_and_then_the_tenants_admin_key_provision_with_the_cli(
    stack: Stack, operator_env: dict[str, str]
) -> None:
    ns = f"cli-{uuid.uuid4().hex[:8]}"
    created = ok_json(
        chronicle(operator_env, "namespace", "create", ns, "--retention-days", "5", "-o", "json")
    )
    assert created["name"] == ns and created["settings"]["retention_days"] == 5
    assert ns in [row["name"] for row in ok_json(chronicle(operator_env, "namespace", "list", "-o", "json"))]

    issued = ok_json(
        chronicle(
            operator_env,
            "-n",
            ns,
            "key",
            "create",
            "--name",
            "app",
            "--role",
            "client",
            "--role",
            "admin",
            "-o",
            "json",
        )
    )
    admin_env = cli_env(stack, None, CHRONICLE_API_KEY=issued["api_key"], CHRONICLE_NAMESPACE=ns)

    joined = ok_json(
        chronicle(admin_env, "member", "grant", "bob", "--role", "viewer", "--new-user", "-o", "json")
    )
    assert joined["username"] == "bob" and joined["one_time_password"]
    assert ok_json(chronicle(admin_env, "member", "list", "-o", "json")) == [
        {"username": "bob", "role": "viewer"}
    ]
    assert ok_json(
        chronicle(admin_env, "namespace", "update", "--set", "retention_days=9", "-o", "json")
    ) == {"retention_days": {"old": 5, "new": 9}}
    assert (
        ok_json(chronicle(admin_env, "namespace", "describe", "-o", "json"))["settings"]["retention_days"]
        == 9
    )

    extra = ok_json(chronicle(admin_env, "key", "create", "--name", "ci", "--role", "client", "-o", "json"))
    rotated = ok_json(
        chronicle(admin_env, "key", "rotate", str(extra["id"]), "--grace-seconds", "0", "-o", "json")
    )
    assert rotated["api_key"] != extra["api_key"]
    old_env = cli_env(stack, None, CHRONICLE_API_KEY=extra["api_key"], CHRONICLE_NAMESPACE=ns)
    assert chronicle(old_env, "workflow", "list").returncode == 4  # expired at once: unauthenticated
    ok_json(chronicle(admin_env, "key", "revoke", str(rotated["id"]), "-o", "json"))
    states = {row["id"]: row["state"] for row in ok_json(chronicle(admin_env, "key", "list", "-o", "json"))}
    assert states[extra["id"]] == "expired" and states[rotated["id"]] == "revoked"
    table = chronicle(admin_env, "key", "list")
    assert table.returncode == 0 and "app" in table.stdout and issued["api_key"] not in table.stdout

    assert chronicle(admin_env, "member", "revoke", "bob", "-o", "json").returncode == 0
    assert ok_json(chronicle(admin_env, "member", "list", "-o", "json")) == []

    # The tenant's key is no operator: 5 (permission denied); bad input: 2.
    assert chronicle(admin_env, "namespace", "list").returncode == 5
    bad = chronicle(admin_env, "namespace", "update", "--set", "retention_days=0")
    assert bad.returncode == 2 and "retention_days" in bad.stderr
    assert chronicle(operator_env, "namespace", "describe", "no-such-namespace").returncode == 3

    refused = subprocess.run(
        [sys.executable, "-m", "sdk.cli", "namespace", "delete", ns],
        env=operator_env,
        cwd=Path("/"),
        input="not-the-name\n",
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert refused.returncode == 2
    assert chronicle(operator_env, "namespace", "describe", ns).returncode == 0
    deleted = ok_json(chronicle(operator_env, "namespace", "delete", ns, "--yes", "-o", "json"))
    assert deleted["deleted"] == ns
    assert chronicle(operator_env, "namespace", "describe", ns).returncode == 3
