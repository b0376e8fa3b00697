"""``WorkflowEnvironment``: a Chronicle server for workflow tests, as Temporal's gives a dev server.

``start_local()`` starts a private Chronicle stack and connects a client to it: the server
checkout's own ``manage.py start_dev`` run as a subprocess (the SDK imports no server code),
on a free port, with a temporary state directory, so nothing of a developer's ``make run``
is touched; ``shutdown()`` (or leaving ``async with``) stops it again. The checkout is found
from ``dev_server_existing_path``, ``CHRONICLE_SERVER_DIR``, the working directory upward,
or the directory the SDK itself was imported from. Its database is ``DATABASE_URL`` when set
(migrated by the start), else the embedded PostgreSQL ``start_dev`` makes in the state
directory. An SDK installed without a checkout cannot start a server: use
``WorkflowEnvironment.from_client(await Client.connect(...))`` with a running one.

``start_time_skipping()`` starts the same stack with ``CHRONICLE_TIME_SKIPPING=true``: its
server keeps a clock of its own that jumps to the next timer whenever no worker has anything
to do, so a test's 30-day ``workflow.sleep`` ends in a fraction of a second, as under
Temporal's test server (see :class:`_TimeSkippingEnvironment` for how it differs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from sdk.client import Client
from sdk.converter import DataConverter

STARTUP_TIMEOUT_SECONDS = 180.0
STOP_TIMEOUT_SECONDS = 30.0
START_DEV = Path("chronicle") / "management" / "commands" / "start_dev.py"
# Temporal's start_local options that concern its downloaded binary or gRPC: accepted, unused.
TEMPORAL_LOCAL_OPTIONS = frozenset(
    {
        "interceptors",
        "plugins",
        "default_workflow_query_reject_condition",
        "retry_config",
        "rpc_metadata",
        "tls",
        "download_dest_dir",
        "ui",
        "ui_port",
        "runtime",
        "search_attributes",
        "dev_server_database_filename",
        "dev_server_log_format",
        "dev_server_log_level",
        "dev_server_download_version",
        "dev_server_download_ttl",
    }
)
# Temporal's start_time_skipping options that concern its downloaded test server: accepted, unused.
TEMPORAL_TEST_SERVER_OPTIONS = frozenset({"test_server_download_version", "test_server_download_ttl"})
TIME_SKIPPING_ENV = "CHRONICLE_TIME_SKIPPING"


class WorkflowEnvironment:
    """A client on a Chronicle server for tests: ``env.client``, ``await env.shutdown()``."""

    def __init__(self, client: Client) -> None:
        self._client = client

    @property
    def client(self) -> Client:
        return self._client

    @property
    def supports_time_skipping(self) -> bool:
        return False

    @staticmethod
    def from_client(client: Client) -> WorkflowEnvironment:
        """An environment on a server already running; ``shutdown`` leaves the server as it is."""
        return WorkflowEnvironment(client)

    @staticmethod
    async def start_local(
        *,
        namespace: str = "default",
        data_converter: DataConverter | None = None,
        identity: str | None = None,
        ip: str = "127.0.0.1",
        port: int | None = None,
        dev_server_existing_path: str | os.PathLike[str] | None = None,
        dev_server_extra_args: Sequence[str] = (),
        startup_timeout: float = STARTUP_TIMEOUT_SECONDS,
        server_env: Mapping[str, str] | None = None,
        **temporal_options: Any,
    ) -> WorkflowEnvironment:
        """Start a private Chronicle stack (see the module docstring) and connect to it.

        ``server_env`` adds environment variables to the stack's processes (Chronicle's own).
        """
        unknown = sorted(set(temporal_options) - TEMPORAL_LOCAL_OPTIONS)
        if unknown:
            raise TypeError(f"start_local() got unexpected keyword argument(s): {', '.join(unknown)}")
        if ip != "127.0.0.1":
            raise ValueError("the local Chronicle stack listens on 127.0.0.1 only")
        checkout = find_server_checkout(dev_server_existing_path)
        server = LocalServer(checkout, port or _free_port(), list(dev_server_extra_args), server_env)
        try:
            dev = await server.start(startup_timeout)
            if namespace != dev["namespace"]:
                raise ValueError(f"the local stack serves namespace {dev['namespace']!r}, not {namespace!r}")
            client = await Client.connect(
                dev["url"],
                namespace=dev["namespace"],
                api_key=dev["api_key"],
                data_converter=data_converter,
                identity=identity,
                interceptors=temporal_options.get("interceptors") or (),
            )
        except BaseException:
            server.stop()
            raise
        return _LocalEnvironment(client, server)

    @staticmethod
    async def start_time_skipping(
        *,
        data_converter: DataConverter | None = None,
        identity: str | None = None,
        port: int | None = None,
        test_server_existing_path: str | os.PathLike[str] | None = None,
        test_server_extra_args: Sequence[str] = (),
        startup_timeout: float = STARTUP_TIMEOUT_SECONDS,
        **temporal_options: Any,
    ) -> WorkflowEnvironment:
        """Start a private Chronicle stack whose clock skips to the next timer when idle.

        ``test_server_existing_path`` and ``test_server_extra_args`` name the server checkout
        and extra ``start_dev`` arguments, as ``start_local``'s ``dev_server_*`` options do.
        """
        options = {k: v for k, v in temporal_options.items() if k not in TEMPORAL_TEST_SERVER_OPTIONS}
        local = await WorkflowEnvironment.start_local(
            data_converter=data_converter,
            identity=identity,
            port=port,
            dev_server_existing_path=test_server_existing_path,
            dev_server_extra_args=test_server_extra_args,
            startup_timeout=startup_timeout,
            server_env={TIME_SKIPPING_ENV: "true"},
            **options,
        )
        assert isinstance(local, _LocalEnvironment)
        return _TimeSkippingEnvironment(local.client, local.server)

    async def sleep(self, duration: timedelta | float) -> None:
        """Wait ``duration`` of real time (no time is skipped here)."""
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
        await asyncio.sleep(seconds)

    async def get_current_time(self) -> datetime:
        return datetime.now(UTC)

    @contextlib.contextmanager
    def auto_time_skipping_disabled(self) -> Iterator[None]:
        """Nothing to disable: this environment never skips time."""
        yield

    async def shutdown(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> WorkflowEnvironment:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()


class _LocalEnvironment(WorkflowEnvironment):
    """The environment ``start_local`` made: its shutdown stops the stack too."""

    def __init__(self, client: Client, server: LocalServer) -> None:
        super().__init__(client)
        self._server = server

    @property
    def server(self) -> LocalServer:
        return self._server

    async def shutdown(self) -> None:
        try:
            await super().shutdown()
        finally:
            await asyncio.to_thread(self._server.stop)


class _TimeSkippingEnvironment(_LocalEnvironment):
    """The environment ``start_time_skipping`` made: a stack whose server skips time.

    The stack's shard owner jumps its clock to the next timer whenever no worker has
    anything to do (``history.time_skipping`` on the server). Temporal's test server skips
    only while a client awaits a workflow's result (or ``env.sleep`` asks); Chronicle's
    skips whenever the stack is idle, result awaited or not. A test that starts a workflow
    and inspects it (signals, queries) before its timers fire holds the clock with
    ``auto_time_skipping_disabled()``.

    ``sleep`` moves the clock by the whole duration at once: timers due within it fire
    right after, each seeing the later time, where Temporal's fires them one by one at
    their own times. ``sleep`` returns once those timers fired (the server waits up to
    a few seconds for them), not once the workflows woken by them have run.
    """

    @property
    def supports_time_skipping(self) -> bool:
        return True

    async def sleep(self, duration: timedelta | float) -> None:
        """Move the server's clock forward by ``duration`` (no real waiting)."""
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
        await self.client.transport.post("/time-skipping/sleep", {"seconds": seconds})

    async def get_current_time(self) -> datetime:
        """The server's skipped clock: real time plus every jump so far."""
        state = await self.client.transport.get("/time-skipping") or {}
        return datetime.fromisoformat(str(state["time"]).replace("Z", "+00:00"))

    @contextlib.contextmanager
    def auto_time_skipping_disabled(self) -> Iterator[None]:
        """Stop the server's automatic jumps inside the block (``env.sleep`` still moves it).

        A plain ``with`` block, as in Temporal, so each end is one short blocking call.
        """
        self._clock_call("hold")
        try:
            yield
        finally:
            self._clock_call("release")

    def _clock_call(self, action: str) -> None:
        dev = self.server.dev_json()
        if dev is None:
            raise RuntimeError("the time-skipping stack is not running")
        url = f"{dev['url']}/api/v1/namespaces/{dev['namespace']}/time-skipping/{action}"
        answer = httpx.post(url, headers={"Authorization": f"Bearer {dev['api_key']}"}, timeout=30.0)
        answer.raise_for_status()


def find_server_checkout(given: str | os.PathLike[str] | None = None) -> Path:
    """The Chronicle server checkout to start: a directory holding ``manage.py`` and ``start_dev``."""
    candidates: list[Path] = []
    if given is not None:
        path = Path(given)
        candidates.append(path.parent if path.name == "manage.py" else path)
    elif os.environ.get("CHRONICLE_SERVER_DIR"):
        candidates.append(Path(os.environ["CHRONICLE_SERVER_DIR"]))
    else:
        here = Path.cwd().resolve()
        candidates.extend([here, *here.parents, Path(__file__).resolve().parents[2]])
    for candidate in candidates:
        if (candidate / "manage.py").is_file() and (candidate / START_DEV).is_file():
            return candidate
    where = ", ".join(str(c) for c in candidates)
    raise RuntimeError(
        f"no Chronicle server checkout found (looked in {where}): start_local() runs the server's "
        "manage.py start_dev; pass dev_server_existing_path= or set CHRONICLE_SERVER_DIR, or use "
        "WorkflowEnvironment.from_client(await Client.connect(...)) with a running server"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """``manage.py start_dev`` in a checkout, as a child process with its own state directory."""

    def __init__(
        self, checkout: Path, port: int, extra_args: list[str], env: Mapping[str, str] | None = None
    ) -> None:
        self.checkout = checkout
        self.port = port
        self.extra_args = extra_args
        self.env = dict(env or {})
        self.state_dir = Path(tempfile.mkdtemp(prefix="chronicle-env-"))
        self.log = self.state_dir / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def _python(self) -> str:
        venv = self.checkout / ".venv" / "bin" / "python"
        return str(venv) if venv.is_file() else sys.executable

    async def start(self, timeout: float) -> dict[str, str]:
        """Start the stack; returns its ``dev.json`` once the frontend answers."""
        command = [self._python(), "manage.py", "start_dev", "--port", str(self.port), "--no-demo-worker"]
        env = {**os.environ, **self.env, "CHRONICLE_STATE_DIR": str(self.state_dir), "PYTHONUNBUFFERED": "1"}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, *self.extra_args],
                cwd=self.checkout,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the local Chronicle stack exited early:\n{self._log_tail()}")
                dev = self.dev_json()
                if dev and await _answers(http, f"{dev['url']}/readyz"):
                    return dev
                await asyncio.sleep(0.25)
        raise RuntimeError(f"the local Chronicle stack did not start in {timeout:.0f}s:\n{self._log_tail()}")

    def dev_json(self) -> dict[str, str] | None:
        try:
            data = json.loads((self.state_dir / "dev.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return {key: str(value) for key, value in data.items()} if isinstance(data, dict) else None

    def _log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM (``start_dev`` stops its children and its embedded PostgreSQL), then SIGKILL."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(self.state_dir, ignore_errors=True)


async def _answers(http: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await http.get(url)).status_code == 200
    except httpx.HTTPError:
        return False
