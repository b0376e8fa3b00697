"""Helpers for the CLI tests (no tests here): running ``chronicle`` as a user does, a subprocess
(``python -m sdk.cli``) against the real stack, its connection from the environment, from nowhere
near a ``.chronicle/dev.json``; and an SDK worker in a thread for the workflows it drives."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sdk.client import Client
from sdk.worker import Worker
from tests.conftest import ROOT, Stack, Tenant


def cli_env(stack: Stack | None, tenant: Tenant | None, key: str = "all", **extra: str) -> dict[str, str]:
    """The environment of one run: the stack and key as ``CHRONICLE_*`` variables and no
    profile file, so only what the test gives is used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "TEMPORAL_"))}
    env["PYTHONPATH"] = str(ROOT)
    env["CHRONICLE_CONFIG_FILE"] = "/nonexistent/chronicle.toml"
    if stack is not None:
        env["CHRONICLE_URL"] = stack.url
    if tenant is not None:
        env["CHRONICLE_NAMESPACE"] = tenant.namespace
        env["CHRONICLE_API_KEY"] = tenant.keys[key]
    env.update(extra)
    return env


def chronicle(
    env: dict[str, str], *args: str, cwd: Path | None = None, timeout: float = 90, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``chronicle ARGS`` run to its end (``stdin`` its input); the working directory is one
    with no dev.json."""
    return subprocess.run(
        [sys.executable, "-m", "sdk.cli", *args],
        env=env,
        cwd=cwd or Path("/"),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok_json(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON a successful run printed (the run failing fails the test with its stderr)."""
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    return json.loads(done.stdout)


@contextmanager
def running_worker(
    stack: Stack, tenant: Tenant, queue: str, workflows: Sequence[type], activities: Sequence[Any] = ()
) -> Iterator[None]:
    """An SDK worker polling ``queue`` in a thread of its own for the ``with`` block."""
    ready, stop = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    async def serve() -> None:
        client = await Client.connect(stack.url, namespace=tenant.namespace, api_key=tenant.keys["all"])
        try:
            async with Worker(
                client, task_queue=queue, workflows=list(workflows), activities=list(activities)
            ):
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.05)
        finally:
            await client.close()

    def main() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=main, name=f"worker-{queue}", daemon=True)
    thread.start()
    assert ready.wait(20), "the worker did not start"
    assert not failure, failure
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
