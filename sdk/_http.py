"""The one HTTP seam between the SDK and the server: auth, JSON, error mapping and retries.

Every client and worker call goes through :class:`HttpTransport`, so the rules for
what is retried (network errors and 5xx on idempotent calls, 429 after its
Retry-After) and how server errors become SDK exceptions live in one place.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

import httpx

from sdk._keepalive import KeepAlivePool
from sdk._wire_codec import apply_codec
from sdk.exceptions import RPCError, WorkflowQueryFailedError

if TYPE_CHECKING:
    from sdk.converter import DataConverter, PayloadCodec

log = logging.getLogger("sdk.http")

NOT_FOUND_CODES = {"not_found", "workflow_execution_already_completed", "stale_task_token"}

# Connections are kept open between calls (HTTP/1.1 keep-alive), enough of them for a
# worker's long polls plus its reports and a busy client's concurrent calls. An idle one is
# dropped after 2 s, before the server's own 5 s keep-alive timeout can close it under a
# request being sent on it (which would fail that request with a read error).
CONNECTION_LIMITS = httpx.Limits(max_connections=256, max_keepalive_connections=256, keepalive_expiry=2.0)


class NotFoundError(RPCError):
    """The execution, run or task token the call named does not exist (any more)."""


class AlreadyStartedRPCError(RPCError):
    """A start or conflict refusal (409): the id is taken under the requested policy."""


class RateLimitedError(RPCError):
    """The server asked the caller to slow down (429); ``retry_after`` is in seconds."""

    def __init__(self, message: str, *, status: int, code: str, details: Any, retry_after: float) -> None:
        super().__init__(message, status=status, code=code, details=details)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetrySettings:
    """Backoff for retryable failures: exponential with jitter, bounded attempts."""

    initial: float = 0.2
    maximum: float = 10.0
    attempts: int = 8

    def delay(self, attempt: int) -> float:
        base = min(self.maximum, self.initial * (2 ** (attempt - 1)))
        return float(base * (0.5 + random.random() / 2))


def error_from_response(response: httpx.Response) -> RPCError:
    """Turn a server's ``{"code", "message"}`` error answer into the matching SDK exception."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if isinstance(body, dict) and not body.get("message"):
        body = {**body, "message": response.text[:500]}
    return error_from(response.status_code, body, _retry_after(response))


def error_from(status: int, body: Any, retry_after: float | None = None) -> RPCError:
    """The SDK exception for an error answer's status and ``{"code", "message", "details"}``
    (also what each call of a batch answers)."""
    if not isinstance(body, dict):
        body = {}
    code = str(body.get("code") or "")
    message = str(body.get("message") or f"HTTP {status}")
    details = body.get("details")
    if status == 429:
        return RateLimitedError(
            message, status=status, code=code, details=details, retry_after=max(0.0, float(retry_after or 1))
        )
    if status == 404 or code in NOT_FOUND_CODES:
        return NotFoundError(message, status=status, code=code, details=details)
    if status == 409:
        return AlreadyStartedRPCError(message, status=status, code=code, details=details)
    if code == "query_failed":
        return WorkflowQueryFailedError(message, status=status, code=code, details=details)
    return RPCError(message, status=status, code=code, details=details)


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0


def _is_retryable(exc: BaseException, idempotent: bool) -> bool:
    if isinstance(exc, RateLimitedError):
        return True
    if not idempotent:
        return False
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, RPCError) and exc.status >= 500


class HttpTransport:
    """An ``httpx.AsyncClient`` bound to one namespace's API root and API key."""

    def __init__(
        self,
        url: str,
        namespace: str,
        api_key: str | None,
        *,
        retry: RetrySettings | None = None,
        timeout: float = 30.0,
    ) -> None:
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.namespace = namespace
        self.retry = retry or RetrySettings()
        # Set by the client from its data converter: applied to every payload sent and received.
        self.payload_codec: PayloadCodec | None = None
        self._client = httpx.AsyncClient(
            base_url=f"{url.rstrip('/')}/api/v1/namespaces/{namespace}",
            headers=headers,
            timeout=timeout,
            limits=CONNECTION_LIMITS,
        )
        self._own_client = self._client
        self._timeout = timeout
        self._headers = headers
        self._pool, self._root = _pool_for(self._client.base_url)
        # Called with each call the server answered (instrumentation, tests): see CallSeen.
        self.observers: list[Callable[[CallSeen], None]] = []

    @property
    def connections_opened(self) -> int:
        """How many connections this client has opened to the server (kept alive between calls)."""
        return self._pool.opened if self._pool is not None else 0

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        await self._client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        idempotent: bool = True,
        timeout: float | None = None,
        retry: bool = True,
    ) -> dict[str, Any] | None:
        """Send one call, retrying what is safe to retry; ``None`` for an empty (204) answer."""
        codec = self.payload_codec
        if codec is not None and body:
            body = await apply_codec(body, codec, encode=True)
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = await self._send_once(method, path, body, params, timeout)
                if codec is not None and answer:
                    answer = await apply_codec(answer, codec, encode=False)
                return answer
            except (httpx.TransportError, RPCError) as exc:
                if not retry or attempt >= self.retry.attempts or not _is_retryable(exc, idempotent):
                    raise
                wait = exc.retry_after if isinstance(exc, RateLimitedError) else self.retry.delay(attempt)
                log.warning("%s %s failed (%s); retrying in %.1fs", method, path, _describe(exc), wait)
                await asyncio.sleep(wait)

    async def _send_once(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        params: dict[str, Any] | None,
        timeout: float | None,
    ) -> dict[str, Any] | None:
        clean_params = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        # An absolute URL (the command line's platform-level calls) goes the way httpx takes it.
        lean = self._pool is not None and self._client is self._own_client and "://" not in path
        if lean:
            status, answer = await self._send_lean(method, path, body, clean_params, timeout)
        else:
            status, answer = await self._send_httpx(method, path, body, clean_params, timeout)
        for observe in self.observers:
            observe(CallSeen(method, path, clean_params, status, answer))
        if isinstance(answer, RPCError):
            raise answer
        return answer

    async def _send_httpx(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        params: dict[str, str],
        timeout: float | None,
    ) -> tuple[int, dict[str, Any] | RPCError | None]:
        """The call through httpx: for a client given an httpx client of its own (tests)."""
        response = await self._client.request(
            method,
            path,
            json=body if method != "GET" else None,
            params=params or None,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )
        if response.status_code == 204:
            return 204, None
        if response.status_code >= 400:
            return response.status_code, error_from_response(response)
        return response.status_code, _as_object(response.json())

    async def _send_lean(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        params: dict[str, str],
        timeout: float | None,
    ) -> tuple[int, dict[str, Any] | RPCError | None]:
        """The call on the keep-alive pool (:mod:`sdk._keepalive`), answered as by httpx."""
        assert self._pool is not None
        target = self._root + path + (f"?{urlencode(params)}" if params else "")
        headers = self._headers
        content = b""
        if method != "GET" and body is not None:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            headers = {**headers, "Content-Type": "application/json"}
        answer = await self._pool.request(method, target, headers, content, timeout or self._timeout)
        if answer.status == 204:
            return 204, None
        if answer.status >= 400:
            return answer.status, error_from_response(answer.to_httpx())
        return answer.status, _as_object(json.loads(answer.body))

    async def post(self, path: str, body: dict[str, Any], **options: Any) -> dict[str, Any] | None:
        return await self.request("POST", path, body=body, **options)

    async def get(self, path: str, **options: Any) -> dict[str, Any] | None:
        return await self.request("GET", path, **options)


@dataclass(frozen=True)
class CallSeen:
    """One call the server answered, as the transport's observers see it."""

    method: str
    path: str  # under the namespace's API root
    params: dict[str, str]
    status: int
    answer: dict[str, Any] | RPCError | None  # the JSON answer, or the error it raises


def _as_object(data: Any) -> dict[str, Any]:
    return data if isinstance(data, dict) else {"value": data}


def _pool_for(url: httpx.URL) -> tuple[KeepAlivePool | None, str]:
    """The keep-alive pool for the API root ``url``, and the root's path."""
    if url.scheme not in ("http", "https") or not url.host:
        return None, ""
    tls = ssl.create_default_context() if url.scheme == "https" else None
    port = url.port or (443 if tls else 80)
    default = (tls is None and port == 80) or (tls is not None and port == 443)
    host = f"[{url.host}]" if ":" in url.host else url.host  # an IPv6 address
    host_header = host if default else f"{host}:{port}"
    return KeepAlivePool(url.host, port, tls=tls, host_header=host_header), url.raw_path.decode().rstrip("/")


class ServerClient(Protocol):
    """What calls made on a client's behalf need of it: its transport and its data converter.

    ``sdk.client.Client`` is one. Modules the client is built from (``sdk.schedule``) take
    this rather than the client, so they need not import the module that imports them.
    """

    @property
    def transport(self) -> HttpTransport: ...

    @property
    def data_converter(self) -> DataConverter: ...


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RPCError):
        return f"HTTP {exc.status} {exc.code or ''} {exc.message}".strip()
    return f"{type(exc).__name__}: {exc}"
