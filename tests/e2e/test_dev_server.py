"""``manage.py start_dev`` as a newcomer runs it: no ``DATABASE_URL`` (its own embedded
PostgreSQL, in a temporary state directory), a free port, the demo worker.

The README's shell examples run against it as written, with two substitutions: its port
and its ``dev.json`` (so they cannot drift from what works). Then Ctrl-C (SIGINT) must
leave nothing running: no child, no gunicorn worker, no PostgreSQL.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from chronicle.embedded_postgres import postmaster_pid, stop_server
from tests.conftest import ROOT, free_port, wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc"),
]

README = ROOT / "README.md"
README_PORT_URL = "http://127.0.0.1:7243"
README_DEV_JSON = ".chronicle/dev.json"
NOT_RUN = "<!-- README test: not run"
# Each call must succeed: a README example answering an error fails the test, body shown.
CURL_MUST_SUCCEED = 'curl() { command curl --fail-with-body "$@"; echo; }\n'


@dataclass
class DevServer:
    process: subprocess.Popen[bytes]
    url: str
    port: int
    state_dir: Path
    log: Path

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def dev_json(self) -> dict[str, str]:
        return dict(json.loads((self.state_dir / "dev.json").read_text()))


def start_dev(state_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    # A newcomer has neither: start_dev makes the checkout's key in its state directory.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
    env.update(CHRONICLE_STATE_DIR=str(state_dir), PYTHONUNBUFFERED="1")
    # The README waits for a run's close with a history long-poll, which the server cuts at
    # 20 s; a loaded CI machine may need longer for a demo worker that has just started.
    env["CHRONICLE_HISTORY_WAIT_SECONDS"] = "90"
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "start_dev", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # our SIGINT stands for the terminal's Ctrl-C
        )


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    state_dir = tmp_path_factory.mktemp("chronicle-state")
    log = state_dir.parent / "start_dev.log"
    port = free_port()
    process = start_dev(state_dir, port, log)
    server = DevServer(process, f"http://127.0.0.1:{port}", port, state_dir, log)
    try:
        wait_until(lambda: process.poll() is not None or "press Ctrl-C" in server.output, timeout=180)
        assert process.poll() is None, f"start_dev exited:\n{server.output}"
        wait_until(lambda: "polling task queue 'demo'" in server.output, timeout=60)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        stop_server(state_dir / "pgdata")


def readme_shell_blocks() -> list[str]:
    """The README's ```sh blocks, except those marked as not run (and why) just above."""
    text = README.read_text()
    blocks = []
    for match in re.finditer(r"^```sh\n(.*?)^```$", text, flags=re.S | re.M):
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
        if not before.startswith(NOT_RUN):
            blocks.append(match.group(1))
    return blocks


def test_the_readme_examples_work_as_written(dev_server: DevServer) -> None:
    blocks = readme_shell_blocks()
    script = "\n".join(blocks)
    assert len(blocks) >= 4 and README_PORT_URL in script and README_DEV_JSON in script
    script = script.replace(README_PORT_URL, dev_server.url)
    script = script.replace(README_DEV_JSON, str(dev_server.state_dir / "dev.json"))
    done = subprocess.run(
        ["bash", "-xeuo", "pipefail", "-c", CURL_MUST_SUCCEED + script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    out = done.stdout
    assert '"WorkflowExecutionCompleted"' in out and "285" in out, out  # the FanOut's close event
    assert '"workflow_id":"squares-10"' in out.replace(" ", ""), out  # the built-in query found it
    assert '"workflow_id":"order-42"' in out.replace(" ", ""), out  # and the CustomerId one

    key = dev_server.dev_json["api_key"]
    history = httpx.get(
        f"{dev_server.url}/api/v1/namespaces/default/workflows/order-42/history",
        params={"wait_new_event": "true", "history_event_filter_type": "CLOSE_EVENT"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert history.status_code == 200, history.text
    assert "refunded charge-42" in history.text  # the signal cancelled the order


def test_the_development_key_is_kept_private_in_the_state_directory(dev_server: DevServer) -> None:
    key_file = dev_server.state_dir / "secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    assert len(key) >= 50 and key not in dev_server.output
    # Every server process of the stack was given it, so they all sign with the one key.
    names = ("gunicorn", "run_shard_owner", "run_batch_jobs")
    stack = [pid for pid in descendants(dev_server.process.pid) if any(n in cmdline(pid) for n in names)]
    assert len(stack) >= 3 and {environment(pid).get("SECRET_KEY") for pid in stack} == {key}


def test_the_admin_is_served_with_its_static_files(dev_server: DevServer) -> None:
    page = httpx.get(f"{dev_server.url}/admin/login/", timeout=10)
    assert page.status_code == 200
    css = re.search(r'href="(/static/admin/css/[^"]+\.css)"', page.text)
    assert css, page.text[:500]
    style = httpx.get(dev_server.url + css.group(1), timeout=10)
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")


def test_the_access_log_keeps_requests_but_not_long_polls(dev_server: DevServer) -> None:
    httpx.get(f"{dev_server.url}/login/", timeout=10)
    wait_until(lambda: '"GET /login/ HTTP/1.1" 200' in dev_server.output)
    assert "/workflow-tasks/poll" not in dev_server.output
    assert "/activity-tasks/poll" not in dev_server.output


def test_a_second_start_on_a_busy_port_says_so_before_starting_anything(
    dev_server: DevServer, tmp_path: Path
) -> None:
    log = tmp_path / "second.log"
    second = start_dev(dev_server.state_dir, dev_server.port, log)
    assert second.wait(timeout=60) == 1
    output = log.read_text()
    assert f"port {dev_server.port} on 127.0.0.1 is not free" in output
    assert "Chronicle development server" not in output and "Applying" not in output
    assert postmaster_pid(dev_server.state_dir / "pgdata") is not None  # the first one's, kept


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, gunicorn's workers, ...), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def environment(pid: int) -> dict[str, str]:
    """A process's environment as it was started, from /proc."""
    entries = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return {name: value for name, sep, value in (entry.partition("=") for entry in entries) if sep}


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_stops_every_process_and_the_embedded_postgres(dev_server: DevServer) -> None:
    postmaster = postmaster_pid(dev_server.state_dir / "pgdata")
    children = descendants(dev_server.process.pid)
    assert postmaster is not None and running(postmaster)
    # gunicorn and at least one worker process, shard owner, batch runner, demo worker
    assert len(children) >= 5, children

    dev_server.process.send_signal(signal.SIGINT)
    assert dev_server.process.wait(timeout=60) == 0, dev_server.output

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(pid) for pid in {*children, postmaster}):
        time.sleep(0.1)
    left = sorted(pid for pid in {*children, postmaster} if running(pid))
    assert not left, f"still running after Ctrl-C: {left}\n{dev_server.output[-3000:]}"
    assert "stopped the embedded PostgreSQL" in dev_server.output
