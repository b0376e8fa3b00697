"""The one HTTP seam between the SDK and the server: auth, JSON, error mapping and retries.

Every client and worker call goes through :class:`HttpTransport`, so the rules for
what is retried (network errors and 5xx on idempotent calls, 429 after its
Retry-After) and how server errors become SDK exceptions live in one place.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import httpx

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

    async def close(self) -> None:
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
        response = await self._client.request(
            method,
            path,
            json=body if method != "GET" else None,
            params=clean_params or None,
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )
        if response.status_code == 204:
            return None
        if response.status_code >= 400:
            raise error_from_response(response)
        data = response.json()
        return data if isinstance(data, dict) else {"value": data}

    async def post(self, path: str, body: dict[str, Any], **options: Any) -> dict[str, Any] | None:
        return await self.request("POST", path, body=body, **options)

    async def get(self, path: str, **options: Any) -> dict[str, Any] | None:
        return await self.request("GET", path, **options)


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
