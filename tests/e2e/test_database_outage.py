"""PostgreSQL out of reach: API calls get a fast JSON 503 with Retry-After, then work again.

A real frontend talks to the test database through a TCP relay the test can cut: cutting
it drops every live connection and refuses new ones, as a crashed or restarting server
does. Calls on the lean lane (a start) and on DRF views (the list) must answer 503
``unavailable`` with Retry-After, never an HTML 500; once one has found the server gone,
the others answer within 2 s instead of waiting out the pool's timeout; and when the
relay is back, calls succeed again with nothing lost.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from tests.conftest import Tenant, database_url, free_port, frontend_up, start_frontend, wait_until

POOL_TIMEOUT = 4.0  # the first call of an outage waits this out; the others must not


class Relay:
    """A TCP relay from a local port to PostgreSQL that can be cut and restored."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.listener: socket.socket | None = None
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and reset the live ones."""
        with self.lock:
            if self.listener is not None:
                self.listener.close()
                self.listener = None
            for sock in self.sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self.sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            server = socket.create_connection(self.target)
            with self.lock:
                if self.listener is not listener:  # cut while this one was being accepted
                    client.close()
                    server.close()
                    return
                self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def relay() -> Iterator[Relay]:
    parts = urlsplit(database_url())
    if not parts.port:
        pytest.skip("the test database is on a unix socket: there is no TCP connection to cut")
    relay = Relay((parts.hostname or "127.0.0.1", parts.port))
    relay.start()
    yield relay
    relay.cut()


@pytest.fixture
def frontend(relay: Relay, tmp_path: Any) -> Iterator[str]:
    parts = urlsplit(database_url())
    through_relay = urlunsplit(
        parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{relay.port}")
    )
    env = {
        **os.environ,
        "DATABASE_URL": through_relay,
        "CHRONICLE_DB_POOL_TIMEOUT": str(POOL_TIMEOUT),
        "CHRONICLE_LOG_LEVEL": "WARNING",
        "CHRONICLE_ACCESS_LOG": "",
    }
    port = free_port()
    process = start_frontend(env, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: frontend_up(url), timeout=30)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    began = time.monotonic()
    response = call()
    return response, time.monotonic() - began


def test_an_unreachable_database_is_a_fast_json_503_and_calls_recover(
    frontend: str, relay: Relay, make_tenant: Callable[..., Tenant]
) -> None:
    tenant = make_tenant()
    client = httpx.Client(
        base_url=f"{frontend}/api/v1/namespaces/{tenant.namespace}/",
        headers={"Authorization": f"Bearer {tenant.keys['all']}"},
        timeout=POOL_TIMEOUT + 20,
    )

    def start(workflow_id: str) -> httpx.Response:
        return client.post(
            "workflows", json={"workflow_id": workflow_id, "workflow_type": "T", "task_queue": "q"}
        )

    def listing() -> httpx.Response:
        return client.get("workflows")

    assert start("before").status_code == 201
    relay.cut()

    first, first_took = timed(listing)  # finds the server gone, waiting at most the pool's timeout
    answers = [first] + [timed(call)[0] for call in (listing, lambda: start("during"))]
    later = [timed(call)[1] for call in (listing, lambda: start("during"), listing)]
    for answer in answers:
        assert answer.status_code == 503, answer.text[:300]
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.json()["code"] == "unavailable"
        assert int(answer.headers["retry-after"]) >= 1
    assert first_took < POOL_TIMEOUT + 2
    assert max(later) < 2.0, later

    relay.start()
    wait_until(lambda: listing().status_code == 200, timeout=40, interval=0.5)
    workflow_ids = {run["workflow_id"] for run in listing().json()["executions"]}
    assert "before" in workflow_ids and "during" not in workflow_ids
    assert start("after").status_code == 201
