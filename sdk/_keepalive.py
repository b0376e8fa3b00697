"""A lean HTTP/1.1 client: one pool of keep-alive connections per SDK client.

Every call of a worker and of a client goes to one server, as a small JSON request with
a JSON answer. httpx spent about 0.7 ms of CPU on each (its request and response models,
auth and cookie hooks, httpcore's connection state machine): on this machine more than
the worker's own work on a workflow task, and a tenth of a one-step workflow's latency.
This client writes the request bytes itself and reads the answer with the stream's own
buffer: about 0.07 ms a call (`bench/http_client_cost.py`).

It speaks what the server speaks: ``Content-Length`` or chunked bodies, keep-alive
unless the server says ``Connection: close``, TLS through ``ssl``. Failures are raised as
httpx's exceptions (``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``...) so the
transport's retry rules and its callers see what they saw before. An idle connection is
kept for at most :data:`IDLE_SECONDS`, less than the server's keep-alive timeout, so the
server never closes one as a request is written to it; a reused connection that still
turns out closed before any answer byte (the server restarted) is retried once on a new
one: the server cannot have read that request.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

IDLE_SECONDS = 2.0
MAX_IDLE_CONNECTIONS = 256
_LIMIT = 2**16  # longest header line the reader accepts


@dataclass
class Answer:
    """A response: status, headers (lower-case names) and the whole body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def to_httpx(self) -> httpx.Response:
        """As httpx's model, for the code that turns error answers into exceptions."""
        return httpx.Response(self.status, headers=self.headers, content=self.body)


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = field(default_factory=time.monotonic)

    def close(self) -> None:
        self.writer.close()


class _ClosedBeforeAnswer(Exception):
    """A reused connection was found closed before any byte of the answer."""


class KeepAlivePool:
    """Connections to one ``host:port``, reused call after call."""

    def __init__(self, host: str, port: int, *, tls: ssl.SSLContext | None, host_header: str) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.host_header = host_header
        self._idle: list[_Connection] = []
        self.opened = 0  # connections opened so far: reuse keeps this near the calls in flight

    async def request(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes, timeout: float
    ) -> Answer:
        """Send one request and read its answer within ``timeout`` seconds."""
        head = self._head(method, target, headers, body)
        try:
            async with asyncio.timeout(timeout):
                connection = self._reusable()
                if connection is not None:
                    try:
                        return await self._exchange(connection, head, body, reused=True)
                    except _ClosedBeforeAnswer:
                        pass
                return await self._exchange(await self._connect(), head, body, reused=False)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer to {method} {target} within {timeout:.0f} s") from exc

    def _head(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"host: {self.host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method not in ("GET", "HEAD"):
            lines.append(f"content-length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _reusable(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if now - connection.idle_since < IDLE_SECONDS and not connection.reader.at_eof():
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self.tls, limit=_LIMIT)
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self.opened += 1
        return _Connection(reader, writer)

    async def _exchange(self, connection: _Connection, head: bytes, body: bytes, *, reused: bool) -> Answer:
        keep = False
        try:
            try:
                connection.writer.write(head + body)
                await connection.writer.drain()
                status_line = await connection.reader.readline()
            except OSError as exc:
                if reused:
                    raise _ClosedBeforeAnswer from exc
                raise httpx.WriteError(f"connection to {self.host}:{self.port} failed: {exc}") from exc
            if not status_line:
                if reused:
                    raise _ClosedBeforeAnswer
                raise httpx.RemoteProtocolError("the server closed the connection without an answer")
            answer, keep = await _read_answer(status_line, connection.reader)
            return answer
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            raise httpx.ReadError(f"reading the answer from {self.host}:{self.port} failed: {exc}") from exc
        finally:
            if keep:
                connection.idle_since = time.monotonic()
                if len(self._idle) < MAX_IDLE_CONNECTIONS:
                    self._idle.append(connection)
                else:
                    connection.close()
            else:
                connection.close()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


async def _read_answer(status_line: bytes, reader: asyncio.StreamReader) -> tuple[Answer, bool]:
    """The answer after its status line, and whether the connection may be kept."""
    version, status = status_line.split(b" ", 2)[:2]
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif int(status) in (204, 304):
        body = b""
    else:  # the body runs to the end of the connection
        return Answer(int(status), headers, await reader.read()), False
    closes = headers.get("connection", "").lower() == "close" or version == b"HTTP/1.0"
    return Answer(int(status), headers, body), not closes


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readline()).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
