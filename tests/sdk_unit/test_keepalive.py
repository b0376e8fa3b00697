"""The SDK's keep-alive HTTP client against real sockets on this machine.

A small server written here answers as the cases need: a length-delimited and a chunked
body, ``Connection: close``, a connection dropped while idle, no answer at all. The pool
must reuse one connection call after call, open a new one when the server closed the
old, retry once (only) a request a closed idle connection never delivered, and fail the
way httpx failed (``ConnectError``, ``ReadTimeout``), which the transport's retry rules
rely on.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

import httpx
import pytest

from sdk._keepalive import KeepAlivePool

Reply = Callable[[bytes], Awaitable[bytes | None]]


async def _serve(reply: Reply) -> tuple[asyncio.Server, list[bytes], list[int]]:
    """A server answering each request with ``reply(request)``; None closes the connection.
    Returns the server, the requests it read and how many connections it accepted."""
    requests: list[bytes] = []
    connections = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections[0] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.startswith(b"content-length")
                    ),
                    0,
                )
                request = head + await reader.readexactly(length)
                requests.append(request)
                answer = await reply(request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, requests, connections


def _port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


def _json(body: object, *extra: str) -> bytes:
    data = json.dumps(body).encode()
    head = ["HTTP/1.1 200 OK", "content-type: application/json", f"content-length: {len(data)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def test_calls_share_one_connection_and_read_both_body_framings() -> None:
    async def scenario() -> None:
        async def reply(request: bytes) -> bytes:
            if b"/chunked" in request:
                return (
                    b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
                )
            return _json({"echo": json.loads(request.split(b"\r\n\r\n", 1)[1] or b"null")})

        server, requests, connections = await _serve(reply)
        pool = KeepAlivePool("127.0.0.1", _port(server), tls=None, host_header="api")
        first = await pool.request("POST", "/x", {"authorization": "Bearer k"}, b'{"n":1}', 5)
        chunked = await pool.request("GET", "/chunked", {}, b"", 5)
        second = await pool.request("POST", "/x", {}, b'{"n":2}', 5)
        await pool.close()
        server.close()

        assert (first.status, json.loads(first.body)) == (200, {"echo": {"n": 1}})
        assert json.loads(chunked.body) == {"a": 1}
        assert json.loads(second.body) == {"echo": {"n": 2}}
        assert connections[0] == 1
        assert requests[0].startswith(b"POST /x HTTP/1.1\r\nhost: api\r\nauthorization: Bearer k\r\n")
        assert b"content-length: 7\r\n" in requests[0]

    asyncio.run(scenario())


def test_connection_close_is_honoured_and_the_next_call_opens_a_new_one() -> None:
    async def scenario() -> None:
        async def reply(request: bytes) -> bytes:
            return _json({}, "connection: close")

        server, _, connections = await _serve(reply)
        pool = KeepAlivePool("127.0.0.1", _port(server), tls=None, host_header="api")
        for _ in range(3):
            assert (await pool.request("GET", "/", {}, b"", 5)).status == 200
        await pool.close()
        server.close()
        assert connections[0] == 3

    asyncio.run(scenario())


def test_an_idle_connection_the_server_dropped_is_retried_once_on_a_new_one() -> None:
    async def scenario() -> None:
        calls = [0]

        async def reply(request: bytes) -> bytes | None:
            calls[0] += 1
            # The first connection answers once, then the server drops it unasked.
            return _json({"call": calls[0]}) if calls[0] != 2 else None

        server, requests, connections = await _serve(reply)
        pool = KeepAlivePool("127.0.0.1", _port(server), tls=None, host_header="api")
        await pool.request("GET", "/a", {}, b"", 5)
        answer = await pool.request("GET", "/b", {}, b"", 5)
        await pool.close()
        server.close()

        # The second request reached the dropped connection's server side, which closed
        # without answering: the pool sent it again, once, on a new connection.
        assert json.loads(answer.body) == {"call": 3}
        assert connections[0] == 2 and len(requests) == 3

    asyncio.run(scenario())


def test_a_new_connection_closed_without_an_answer_is_an_error_not_a_retry() -> None:
    async def scenario() -> None:
        async def reply(request: bytes) -> None:
            return None

        server, requests, _ = await _serve(reply)
        pool = KeepAlivePool("127.0.0.1", _port(server), tls=None, host_header="api")
        with pytest.raises(httpx.RemoteProtocolError):
            await pool.request("POST", "/x", {}, b"{}", 5)
        server.close()
        assert len(requests) == 1

    asyncio.run(scenario())


def test_silence_is_a_read_timeout_and_no_server_a_connect_error() -> None:
    async def scenario() -> None:
        async def reply(request: bytes) -> bytes:
            await asyncio.sleep(10)
            return _json({})

        server, _, _ = await _serve(reply)
        pool = KeepAlivePool("127.0.0.1", _port(server), tls=None, host_header="api")
        with pytest.raises(httpx.ReadTimeout):
            await pool.request("GET", "/", {}, b"", 0.2)
        server.close()

        with socket.socket() as probe:  # a port with nobody listening
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        with pytest.raises(httpx.ConnectError):
            await KeepAlivePool("127.0.0.1", free, tls=None, host_header="api").request(
                "GET", "/", {}, b"", 2
            )

    asyncio.run(scenario())
