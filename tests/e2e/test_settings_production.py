"""Production settings, as a process sees them: a missing SECRET_KEY stops every command
with one message naming it, wherever the database is, and `check --deploy` is clean with
the production example."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chronicle.embedded_postgres import socket_database_url
from tests.conftest import ROOT

ENV_EXAMPLE = ROOT / "platform" / "env.example"


def production_example() -> dict[str, str]:
    """The uncommented assignments of platform/env.example."""
    values: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def manage(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("CHRONICLE_", "SECURE_"))}
    clean.pop("SECRET_KEY", None)
    clean["DJANGO_SETTINGS_MODULE"] = "chronicle.settings"  # as a deployment loads them
    return subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("argv", [["check"], ["run_shard_owner"], ["migrate", "--noinput"]])
def test_without_secret_key_on_a_remote_database_every_command_refuses_to_start(argv: list[str]) -> None:
    done = manage(argv, {"DATABASE_URL": "postgres://chronicle@db.example.invalid:5432/chronicle"})
    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize(
    "database_url",
    [
        "postgres://postgres@127.0.0.1:5432/chronicle",
        "postgres://postgres@localhost:5432/chronicle",
        "postgres://postgres@[::1]:5432/chronicle",
        "postgres:///chronicle",  # no host: libpq's default socket
        socket_database_url("/var/run/postgresql", user="postgres", database="chronicle"),
        socket_database_url("/srv/app/.chronicle/pgdata", user="postgres", database="postgres"),
    ],
    ids=["loopback", "localhost", "loopback-v6", "no-host", "unix-socket", "embedded-socket-folder"],
)
def test_without_secret_key_a_database_on_this_machine_is_refused_too(
    database_url: str, tmp_path: Path
) -> None:
    """A single-host deployment (PostgreSQL beside the frontend) is no development machine:
    it must not sign with the development key anyone can read in the source."""
    done = manage(["check"], {"DATABASE_URL": database_url, "CHRONICLE_STATE_DIR": str(tmp_path)})
    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in done.stderr, done.stderr[-2000:]
    assert "SECRET_KEY=$(cat .chronicle/secret_key)" in done.stderr  # the development way out
    assert not any(tmp_path.iterdir())  # no key file made behind the operator's back


def test_check_deploy_is_clean_with_the_production_example(tmp_path: Path) -> None:
    env = {**production_example(), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    done = manage(["check", "--deploy", "--fail-level", "WARNING"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_check_deploy_flags_the_development_key_debug_and_plain_cookies(tmp_path: Path) -> None:
    env = {**production_example(), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    del env["SECRET_KEY"], env["SESSION_COOKIE_SECURE"]
    # The only way left to the development key: DEBUG on, with local host names.
    env.update(CHRONICLE_DEBUG="true", ALLOWED_HOSTS="127.0.0.1,localhost")
    done = manage(["check", "--deploy"], env)
    assert "security.W009" in done.stderr + done.stdout  # the known development key
    assert "security.W018" in done.stderr + done.stdout  # DEBUG on
    assert "security.W012" in done.stderr + done.stdout  # SESSION_COOKIE_SECURE off


def test_debug_with_a_public_host_refuses_to_start(tmp_path: Path) -> None:
    env = {**production_example(), "CHRONICLE_DEBUG": "true", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = manage(["check"], env)
    assert done.returncode != 0
    assert "CHRONICLE_DEBUG is on while ALLOWED_HOSTS names chronicle.example.com" in done.stderr
