"""The deploy files hang together: compose.yaml starts PostgreSQL, migrates once, then the
frontend, shard owner and batch runner with health checks, all from the one non-root image;
the Procfile and systemd migrate before anything serves. No container runtime is needed:
compose.yaml is parsed (and checked by `docker compose config` where that exists)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
CHRONICLE_SERVICES = ("migrate", "frontend", "shard-owner", "batch-runner")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8")))


def test_compose_starts_the_database_then_migrations_then_every_process(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"db", *CHRONICLE_SERVICES}
    assert services["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert services["migrate"]["restart"] == "no"
    for name in ("frontend", "shard-owner", "batch-runner"):
        assert services[name]["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    for name in CHRONICLE_SERVICES:
        assert services[name]["build"] == "."
        assert services[name]["image"] == services["frontend"]["image"]  # one image for all


def test_compose_commands_are_commands_the_project_has(compose: dict[str, Any]) -> None:
    commands = get_commands()
    for name in CHRONICLE_SERVICES:
        text = " ".join(compose["services"][name]["command"])
        for command in re.findall(r"manage\.py (\w+)", text):
            assert command in commands, f"{name} runs an unknown command {command}"
    assert "migrate --noinput" in " ".join(compose["services"]["migrate"]["command"])
    assert compose["services"]["frontend"]["command"][:2] == ["gunicorn", "chronicle.asgi:application"]


def test_every_long_running_service_has_a_health_check_that_reads_what_it_writes(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert services["frontend"]["healthcheck"]["test"][-1].endswith("/readyz")
    sources = {
        "shard-owner": ROOT / "history" / "shard_owner.py",
        "batch-runner": ROOT / "executions" / "batch_runner.py",
    }
    for name, source in sources.items():
        test = services[name]["healthcheck"]["test"]
        assert test[1:5] == ["python", "-m", "chronicle.health", "alive"]
        assert f'health.beat("{test[5]}")' in source.read_text(encoding="utf-8"), name


def test_compose_requires_a_secret_key_and_shares_the_metrics_folder(compose: dict[str, Any]) -> None:
    for name in CHRONICLE_SERVICES:
        service = compose["services"][name]
        assert ":?" in service["environment"]["SECRET_KEY"]  # compose refuses to start without it
        assert "metrics:/var/lib/chronicle/metrics" in service["volumes"]
    assert "/var/lib/chronicle/metrics" in (ROOT / "Dockerfile").read_text(encoding="utf-8")


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client")
def test_docker_compose_config_accepts_the_file_where_compose_is_installed() -> None:
    env = {**os.environ, "SECRET_KEY": "x" * 50}
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, env=env)
    if probe.returncode != 0:
        pytest.skip("docker has no compose plugin here")
    done = subprocess.run(
        ["docker", "compose", "config", "-q"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr


def test_the_image_is_slim_runs_as_a_user_and_builds_with_the_shared_script() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()]
    froms = [line for line in lines if line.startswith("FROM ")]
    assert froms and all(line.endswith("-slim") for line in froms)
    user = [line for line in lines if line.startswith("USER ")]
    assert user == ["USER chronicle"]
    assert lines.index("USER chronicle") < next(i for i, line in enumerate(lines) if line.startswith("CMD "))
    assert "RUN platform/image-build.sh install /opt/venv" in lines
    assert any(line.startswith("RUN platform/image-build.sh collect /opt/venv") for line in lines)
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert {".git", ".venv", ".chronicle", ".env"} <= set(ignored)


def test_the_procfile_and_systemd_migrate_before_serving() -> None:
    procfile = dict(
        line.split(": ", 1) for line in (ROOT / "platform" / "Procfile").read_text().splitlines() if line
    )
    assert procfile["release"].startswith("python manage.py migrate --noinput")
    units = ROOT / "platform" / "systemd"
    migrate = (units / "chronicle-migrate.service").read_text()
    assert "Type=oneshot" in migrate and "manage.py migrate --noinput" in migrate
    for name in ("frontend", "shard-owner", "batch-runner"):
        unit = (units / f"chronicle-{name}.service").read_text()
        assert "After=network-online.target chronicle-migrate.service" in unit, name
