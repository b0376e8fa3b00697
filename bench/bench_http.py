"""A lean HTTP/1.1 client for the benches' load generators: one keep-alive connection per
thread, JSON in and out.

The benches share this 2-core machine with the stack they measure, so whatever their
client spends is taken from the server. httpx spent about 1 ms of CPU on each call (its
request and response models, hooks and connection state machine); ``http.client`` on a
kept connection spends about 0.17 ms. Against a do-nothing ASGI app, eight threads made
about 1,000 calls a second with httpx and 5,400 with this: with httpx the signal phase
measured the client as much as the server.

A connection idle for :data:`IDLE_SECONDS` is replaced before it is used (the server's
keep-alive timeout is longer), and a kept connection found closed before any byte of the
answer (the server restarted, or timed it out anyway) is retried once on a new one: the
server cannot have read that request.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

IDLE_SECONDS = 2.0


@dataclass
class Response:
    """What the benches read of an answer (the names httpx gives them)."""

    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)

    def raise_for_status(self) -> Response:
        if self.status_code >= 400:
            raise RuntimeError(f"HTTP {self.status_code}: {self.text[:300]}")
        return self


class KeepAliveClient:
    """POSTs of JSON to one server, each thread on its own kept connection."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float = 30.0) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.headers = {**headers, "Content-Type": "application/json"}
        self.timeout = timeout
        self._local = threading.local()

    def post(self, path: str, body: Any) -> Response:
        """POST ``body`` as JSON to the base URL's path plus ``path``; the whole answer."""
        payload = json.dumps(body).encode()
        conn, made_now = self._connection()
        try:
            return self._send(conn, path, payload)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if made_now:
                raise  # a new connection failed: not a kept one the server had closed
            self._drop()
            return self._send(self._connection()[0], path, payload)

    def _send(self, conn: http.client.HTTPConnection, path: str, payload: bytes) -> Response:
        conn.request("POST", self.prefix + path, payload, self.headers)
        answer = conn.getresponse()
        content = answer.read()
        if answer.will_close:
            self._drop()
        else:
            self._local.idle_since = time.monotonic()
        return Response(answer.status, content)

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it was made just now."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and time.monotonic() - self._local.idle_since > IDLE_SECONDS:
            self._drop()
            conn = None
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._local.conn, self._local.idle_since = conn, time.monotonic()
            return conn, True
        return conn, False

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None
