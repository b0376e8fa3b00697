"""What one SDK call costs the caller's process: httpx beside the SDK's keep-alive pool.

Serves a bare JSON answer from uvicorn in a child process (so the server's CPU is not
counted) and sends the same small JSON POST through each client in turn, alternating,
printing wall time and this process's CPU per call:

    python bench/http_client_cost.py [--calls 2000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sdk._keepalive import KeepAlivePool

ANSWER = b'{"ok":true}'


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await receive()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": ANSWER})


def _serve(port: int) -> None:
    uvicorn.run(_app, host="127.0.0.1", port=port, log_level="error", http="httptools", loop="asyncio")


async def _through_httpx(port: int, calls: int) -> tuple[float, float]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:

        async def one() -> None:
            (await client.post("/call", json={"task_token": "t", "result": 1})).json()

        return await _timed(one, calls)


async def _through_pool(port: int, calls: int) -> tuple[float, float]:
    pool = KeepAlivePool("127.0.0.1", port, tls=None, host_header="bench")
    headers = {"content-type": "application/json"}

    async def one() -> None:
        body = json.dumps({"task_token": "t", "result": 1}, separators=(",", ":")).encode()
        json.loads((await pool.request("POST", "/call", headers, body, 10)).body)

    try:
        return await _timed(one, calls)
    finally:
        await pool.close()


async def _timed(one: Callable[[], Awaitable[None]], calls: int) -> tuple[float, float]:
    for _ in range(50):  # connections open, code warm
        await one()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await one()
    return (time.perf_counter() - wall) / calls * 1e3, (time.process_time() - cpu) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = multiprocessing.Process(target=_serve, args=(port,), daemon=True)
    server.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        for round_no in range(1, args.rounds + 1):
            for name, run in (("httpx", _through_httpx), ("keep-alive pool", _through_pool)):
                wall, cpu = asyncio.run(run(port, args.calls))
                print(f"round {round_no} {name:>16}: {wall:.3f} ms a call, {cpu:.3f} ms CPU here")
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
