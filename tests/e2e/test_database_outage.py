"""PostgreSQL out of reach: API calls get a fast JSON 503 with Retry-After, then work again.

A real frontend talks to the test database through a TCP relay the test can cut: cutting
it drops every live connection and refuses new ones, as a crashed or restarting server
does. Calls on the lean lane (a start) and on DRF views (the list) must answer 503
``unavailable`` with Retry-After, never an HTML 500; the first call of the outage
within 3 s, though the pool's timeout is 30 s (its checkout finds the server refusing a
connection), the others within 2 s; and when the relay is back, calls succeed again with
nothing lost.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest

from history.models import WorkflowExecution
from tests.conftest import (
    Tenant,
    database_conninfo,
    database_url,
    free_port,
    frontend_up,
    start_frontend,
    wait_until,
)
from tests.tenant_calls import TenantCalls

POOL_TIMEOUT = 30.0  # the default, for a busy pool: no call of an outage may wait it out


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


def running_frontend(database: str, **settings: str) -> Iterator[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "CHRONICLE_DB_POOL_TIMEOUT": str(POOL_TIMEOUT),
        "CHRONICLE_LOG_LEVEL": "WARNING",
        "CHRONICLE_ACCESS_LOG": "",
        **settings,
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


@pytest.fixture
def frontend(relay: Relay) -> Iterator[str]:
    parts = urlsplit(database_url())
    through_relay = urlunsplit(
        parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{relay.port}")
    )
    yield from running_frontend(through_relay)


@pytest.fixture
def one_connection_frontend() -> Iterator[str]:
    """A frontend of one process whose pool holds a single connection: one stuck call makes
    it busy."""
    yield from running_frontend(
        database_url(), CHRONICLE_WEB_CONCURRENCY="1", CHRONICLE_DB_POOL_MIN="1", CHRONICLE_DB_POOL_MAX="1"
    )


def timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    began = time.monotonic()
    response = call()
    return response, time.monotonic() - began


def test_an_unreachable_database_is_a_fast_json_503_and_calls_recover(
    frontend: str, relay: Relay, make_tenant: Callable[..., Tenant]
) -> None:
    tenant = make_tenant()
    calls = TenantCalls(frontend, tenant, timeout=POOL_TIMEOUT + 20)
    start, listing = calls.start, calls.listing

    assert start("before").status_code == 201
    relay.cut()

    first, first_took = timed(listing)  # finds the server gone
    answers = [first] + [timed(call)[0] for call in (listing, lambda: start("during"))]
    later = [timed(call)[1] for call in (listing, lambda: start("during"), listing)]
    for answer in answers:
        assert answer.status_code == 503, answer.text[:300]
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.json()["code"] == "unavailable"
        assert int(answer.headers["retry-after"]) >= 1
    assert first_took < 3.0, first_took
    assert max(later) < 2.0, later

    relay.start()
    wait_until(lambda: listing().status_code == 200, timeout=40, interval=0.5)
    workflow_ids = {run["workflow_id"] for run in listing().json()["executions"]}
    assert "before" in workflow_ids and "during" not in workflow_ids
    assert start("after").status_code == 201


def test_a_busy_pool_still_waits_for_its_connection(
    one_connection_frontend: str, make_tenant: Callable[..., Tenant]
) -> None:
    """The server answers, but the pool's only connection is taken (a signal waiting for the
    run's row, locked here): the next call waits past the reachability probe for the
    connection, and is served, instead of getting a 503."""
    tenant = make_tenant()
    client = TenantCalls(one_connection_frontend, tenant, timeout=POOL_TIMEOUT + 20).client
    workflow_id = f"busy-{uuid.uuid4().hex[:8]}"
    body = {"workflow_id": workflow_id, "workflow_type": "T", "task_queue": "q"}
    assert client.post("workflows", json=body).status_code == 201
    runs = WorkflowExecution._meta.db_table
    with psycopg.connect(database_conninfo()) as holder:
        holder.execute(f'SELECT 1 FROM "{runs}" WHERE workflow_id = %s FOR UPDATE', [workflow_id])
        signalled: list[httpx.Response] = []
        signal = threading.Thread(
            target=lambda: signalled.append(
                client.post(f"workflows/{workflow_id}/signal", json={"signal_name": "s"})
            )
        )
        signal.start()
        time.sleep(0.5)  # the signal now waits for the row, on the pool's only connection
        threading.Timer(3.0, holder.rollback).start()
        listed, took = timed(lambda: client.get("workflows"))
        signal.join(timeout=30)
    assert listed.status_code == 200, listed.text[:300]
    assert took > 2.0, took  # it waited for the connection, past the probe
    assert signalled and signalled[0].status_code == 200, signalled
