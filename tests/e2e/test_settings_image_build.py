"""The container image's build steps, without a container runtime: platform/image-build.sh
(the very script the Dockerfile runs) installs a fresh virtualenv and collects the static
files; a frontend started from that virtualenv, as the image's default command starts it,
answers its probes and serves the admin's static files itself (WhiteNoise)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from chronicle.launcher import ProcessGroup, ProcessSpec
from tests.conftest import ROOT, Stack, free_port, wait_until

pytestmark = pytest.mark.e2e


def test_the_image_build_steps_make_a_frontend_that_serves(stack: Stack, tmp_path: Path) -> None:
    venv, static = tmp_path / "venv", tmp_path / "static"
    script = str(ROOT / "platform" / "image-build.sh")
    subprocess.run([script, "install", str(venv)], cwd=ROOT, check=True, timeout=240)
    assert not (venv / "bin" / "pg_ctl").exists()
    assert (
        subprocess.run([venv / "bin" / "python", "-c", "import pgserver"], capture_output=True).returncode
        != 0
    )
    env = {**stack.env, "CHRONICLE_STATIC_ROOT": str(static), "CHRONICLE_DB_POOL_MAX": "4"}
    # As the Dockerfile runs it: no SECRET_KEY at build time (the containers are given theirs).
    build_env = {name: value for name, value in env.items() if name != "SECRET_KEY"}
    subprocess.run([script, "collect", str(venv)], cwd=ROOT, env=build_env, check=True, timeout=120)
    assert (static / "admin" / "css" / "base.css").is_file()
    assert (static / "admin" / "css" / "base.css.gz").is_file()  # compressed copies for WhiteNoise

    port = free_port()
    command = [
        str(venv / "bin" / "gunicorn"),
        "chronicle.asgi:application",
        "-c",
        "platform/gunicorn.conf.py",
    ]
    spec = ProcessSpec("image-frontend", [*command, "-b", f"127.0.0.1:{port}"])
    with ProcessGroup([spec], env=env, log_dir=tmp_path / "logs") as group:
        base = f"http://127.0.0.1:{port}"
        group.wait_http(base, timeout=60)
        assert httpx.get(base + "/healthz", timeout=10).status_code == 200
        wait_until(lambda: httpx.get(base + "/readyz", timeout=10).json()["status"] == "ok", timeout=30)
        css = httpx.get(base + "/static/admin/css/base.css", headers={"Accept-Encoding": "gzip"}, timeout=10)
        assert css.status_code == 200
        assert css.headers["content-type"].startswith("text/css")
        assert css.headers.get("content-encoding") == "gzip"
