"""The Restate side of the SDK benchmark: a Restate deployment driven with the same workloads.

Run by ``bench/sdk_bench.py`` in its own process: ``python bench/sdk_bench_restate.py
[plan options]``; progress on stderr, the figures as JSON on stdout (or ``{"skipped":
reason}`` when Restate cannot be run here). The deployment is three processes, as Chronicle's
is server, worker and application:

* the Restate server (npm ``@restatedev/restate-server``, installed on first use into
  bench/.peers/restate/, gitignored) with its default durability (the log's write-ahead log
  is fsynced before a write is acknowledged), its data in a temporary directory and its node,
  admin and ingress ports on free 127.0.0.1 ports;
* the Python service (bench/sdk_bench_restate_service.py, restate-sdk served by hypercorn
  over HTTP/2 cleartext), registered with the server as a deployment;
* this process, the client: it starts each workflow through the ingress with ``/send`` and
  waits for its result with ``/restate/invocation/<id>/attach``, as Chronicle's client starts
  a run and then waits for its result.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from proc_cpu import CpuSnapshot, cpu_by_pid, process_tree
from run_bench import free_port, python_exe, stop_process
from sdk_bench_workloads import CpuProbe, Json, Plan, measure

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
LOG_DIR = BENCH_DIR / "results" / "logs"
PEERS = BENCH_DIR / ".peers" / "restate"
SERVER_PACKAGE = "@restatedev/restate-server"
SERVER_VERSION = "1.7.12"
SERVER_BINARY = PEERS / "node_modules" / "@restatedev" / "restate-server-linux-x64" / "bin" / "restate-server"
# Larger than any run's number of workflows in flight: a start or a result waits for the server.
HTTP_TIMEOUT = httpx.Timeout(300.0, connect=10.0)


def log(message: str) -> None:
    print(f"[restate {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- set-up


def install_server() -> str | None:
    """Install the pinned server with npm unless it is there; the reason when it cannot be."""
    if SERVER_BINARY.exists():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed, so the Restate server cannot be installed"
    log(f"installing {SERVER_PACKAGE}@{SERVER_VERSION} into {PEERS.relative_to(ROOT)}")
    PEERS.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--prefix", str(PEERS), "--ignore-scripts", "--no-audit", "--no-fund"]
    out = subprocess.run(
        [*cmd, f"{SERVER_PACKAGE}@{SERVER_VERSION}"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0 or not SERVER_BINARY.exists():
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return f"npm could not install {SERVER_PACKAGE}@{SERVER_VERSION} ({last})"
    return None


def unavailable() -> str | None:
    """Why Restate cannot run here, or None when it can (installing the server if needed)."""
    missing = [name for name in ("restate", "hypercorn") if importlib.util.find_spec(name) is None]
    if missing:
        return f"{' and '.join(missing)} not installed: pip install -r requirements-bench.txt"
    return install_server()


@dataclass(frozen=True)
class Ports:
    node: int
    admin: int
    ingress: int
    service: int

    @staticmethod
    def pick() -> Ports:
        ports: set[int] = set()
        while len(ports) < 4:
            ports.add(free_port())
        node, admin, ingress, service = sorted(ports)
        return Ports(node, admin, ingress, service)


def server_config(base_dir: Path, ports: Ports) -> str:
    """The server's TOML: data under ``base_dir``, TCP on loopback only, no telemetry; every
    other setting (durability included) at its default."""
    return "\n".join(
        [
            f'base-dir = "{base_dir}"',
            'node-name = "sdk-bench"',
            "disable-telemetry = true",
            'listen-mode = "tcp"',
            f'bind-address = "127.0.0.1:{ports.node}"',
            f'advertised-address = "http://127.0.0.1:{ports.node}/"',
            "",
            "[admin]",
            f'bind-address = "127.0.0.1:{ports.admin}"',
            "",
            "[ingress]",
            f'bind-address = "127.0.0.1:{ports.ingress}"',
            "",
        ]
    )


def wait_ready(url: str, proc: subprocess.Popen[bytes], what: str, timeout: float = 60.0) -> None:
    """Until ``url`` answers 200, failing early if the process has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} (see {LOG_DIR.relative_to(ROOT)})")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer {url} within {timeout:.0f} s")


@dataclass
class Deployment:
    server: subprocess.Popen[bytes]
    service: subprocess.Popen[bytes]
    ingress: str


@contextmanager
def deployment() -> Iterator[Deployment]:
    """A fresh server and the service, registered; everything stopped and removed afterwards."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    ports = Ports.pick()
    with tempfile.TemporaryDirectory(prefix="restate-sdkbench-") as tmp:
        config = Path(tmp) / "restate.toml"
        config.write_text(server_config(Path(tmp) / "data", ports))
        with (
            open(LOG_DIR / "restate-server.log", "wb") as server_log,
            open(LOG_DIR / "restate-service.log", "wb") as service_log,
        ):
            server_cmd = [str(SERVER_BINARY), "--config-file", str(config), "--no-logo"]
            server = subprocess.Popen(server_cmd, stdout=server_log, stderr=subprocess.STDOUT)
            service_py = str(BENCH_DIR / "sdk_bench_restate_service.py")
            service_cmd = [python_exe(), service_py, f"--port={ports.service}"]
            service = subprocess.Popen(service_cmd, cwd=ROOT, stdout=service_log, stderr=subprocess.STDOUT)
            try:
                admin = f"http://127.0.0.1:{ports.admin}"
                ingress = f"http://127.0.0.1:{ports.ingress}"
                wait_ready(f"{admin}/health", server, "restate-server")
                wait_ready(f"{ingress}/restate/health", server, "restate-server's ingress")
                register(admin, f"http://127.0.0.1:{ports.service}", service)
                yield Deployment(server, service, ingress)
            finally:
                stop_process(server)  # first: it holds the connections to the service
                stop_process(service)


def register(admin: str, uri: str, service: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Register the service with the server (retried until the service listens)."""
    deadline = time.monotonic() + timeout
    while True:
        if service.poll() is not None:
            raise RuntimeError(f"the Restate service exited with {service.returncode}")
        try:
            answer = httpx.post(f"{admin}/deployments", json={"uri": uri}, timeout=30.0)
            if answer.status_code in (200, 201):
                names = [s["name"] for s in answer.json().get("services", [])]
                log(f"registered {uri}: {', '.join(names)}")
                return
            reason = f"{answer.status_code} {answer.text[:200]}"
        except httpx.HTTPError as error:
            reason = str(error)
        if time.monotonic() > deadline:
            raise RuntimeError(f"could not register the service: {reason}")
        time.sleep(0.3)


# --------------------------------------------------------------------------- the workloads


class RestateSystem:
    """The workloads through the ingress: start with ``/send``, wait with ``attach``."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def _send(self, workflow: str, key: str, arg: Any = None) -> str:
        # A handler without input takes an empty body with no content type.
        body = b"" if arg is None else json.dumps(arg).encode()
        headers = {} if arg is None else {"content-type": "application/json"}
        answer = await self.client.post(f"/{workflow}/{key}/run/send", content=body, headers=headers)
        if answer.status_code >= 300:
            raise RuntimeError(f"{workflow}/{key} /send: {answer.status_code} {answer.text[:200]}")
        invocation: str = answer.json()["invocationId"]
        return invocation

    async def _attach(self, invocation: str) -> Any:
        answer = await self.client.get(f"/restate/invocation/{invocation}/attach")
        if answer.status_code >= 300:
            raise RuntimeError(f"attach {invocation}: {answer.status_code} {answer.text[:200]}")
        return answer.json()

    async def one_step(self, key: str) -> None:
        await self._attach(await self._send("OneStep", key))

    async def one_local_step(self, key: str) -> None:
        await self._attach(await self._send("OneLocalStep", key))

    async def ten_steps(self, key: str) -> None:
        await self._attach(await self._send("TenSteps", key))

    async def start_sleep(self, key: str, due: float) -> Callable[[], Awaitable[float]]:
        invocation = await self._send("SleepUntil", key, due)

        async def lateness() -> float:
            return float(await self._attach(invocation))

        return lateness


def restate_cpu_probe(found: Deployment) -> CpuProbe:
    """CPU by part: the server, the Python service and this process (the client)."""
    server = process_tree({found.server.pid})
    service = process_tree({found.service.pid})

    def probe() -> dict[str, CpuSnapshot]:
        return {
            "server": cpu_by_pid(server),
            "service": cpu_by_pid(service),
            "client": cpu_by_pid({os.getpid()}),
        }

    return probe


async def drive(found: Deployment, plan: Plan) -> Json:
    # One connection per workflow in flight: the phases keep at most `concurrency` requests open.
    connections = plan.concurrency + 8
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=found.ingress, timeout=HTTP_TIMEOUT, limits=limits) as client:
        return await measure(RestateSystem(client), plan, log, restate_cpu_probe(found))


def parse(argv: list[str]) -> Plan:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    Plan.add_arguments(parser)
    return Plan.from_arguments(parser.parse_args(argv))


def main(argv: list[str]) -> int:
    plan = parse(argv)
    reason = unavailable()
    if reason is not None:
        log(f"Restate skipped: {reason}")
        print(json.dumps({"skipped": reason}))
        return 0
    with deployment() as found:
        log(f"restate-server {SERVER_VERSION}, one service process, this process the client")
        figures = asyncio.run(drive(found, plan))
    figures["server_version"] = SERVER_VERSION
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
