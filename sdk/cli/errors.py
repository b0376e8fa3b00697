"""Exit codes a script can test, and the one translation from a failure to a code and a message.

Every command raises; only :func:`translate` decides what the user reads and which code the
process ends with, so the same server answer means the same code in every group.
"""

from __future__ import annotations

import contextlib
from enum import IntEnum

import click


class ExitCode(IntEnum):
    """What ``chronicle`` exits with (``docs/cli.md`` lists them for scripts)."""

    OK = 0
    # The operation ran and did not succeed: the workflow failed, was cancelled, terminated
    # or timed out (execute, result), a query failed, the server refused the request.
    FAILED = 1
    # The command line is wrong: an unknown flag, a missing option, input that is not JSON,
    # no server address configured, or a request the server calls invalid (HTTP 400).
    USAGE = 2
    NOT_FOUND = 3
    # No API key, or one the server does not know (HTTP 401).
    UNAUTHENTICATED = 4
    # The key is valid but lacks the role the call needs (HTTP 403).
    PERMISSION_DENIED = 5
    # The server could not be reached, or answered 5xx / 429 after the retries.
    UNAVAILABLE = 6
    # The id is taken: a workflow already started, a schedule that exists (HTTP 409).
    ALREADY_EXISTS = 7


class CliError(click.ClickException):
    """A failure to report as ``Error: <message>`` on stderr, ending with ``code``."""

    def __init__(self, message: str, code: ExitCode = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.code = code
        # click declares exit_code on the class; each error carries its own.
        self.exit_code = int(code)  # type: ignore[misc]


_BY_STATUS = {
    400: ExitCode.USAGE,
    401: ExitCode.UNAUTHENTICATED,
    403: ExitCode.PERMISSION_DENIED,
    404: ExitCode.NOT_FOUND,
    409: ExitCode.ALREADY_EXISTS,
    413: ExitCode.USAGE,
    429: ExitCode.UNAVAILABLE,
}
_LABELS = {
    ExitCode.USAGE: "invalid request",
    ExitCode.UNAUTHENTICATED: "unauthenticated (check --api-key or CHRONICLE_API_KEY)",
    ExitCode.PERMISSION_DENIED: "permission denied",
    ExitCode.NOT_FOUND: "not found",
    ExitCode.ALREADY_EXISTS: "already exists",
    ExitCode.UNAVAILABLE: "server unavailable",
}


def code_for_status(status: int) -> ExitCode:
    """The exit code for an HTTP error status."""
    if status >= 500:
        return ExitCode.UNAVAILABLE
    return _BY_STATUS.get(status, ExitCode.FAILED)


def translate(exc: BaseException) -> CliError | None:
    """The :class:`CliError` for an exception a command let out, or None when it is a bug
    (which then shows its traceback). Imports the SDK's error types only now: a failure is
    the one moment they are needed."""
    import httpx

    from sdk.exceptions import RPCError, WorkflowAlreadyStartedError, WorkflowFailureError

    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, RPCError):
        if exc.code == "deadline_exceeded":
            # The server is there; what it waited for (a worker's answer) did not come.
            return CliError(f"timed out: {exc.message}", ExitCode.FAILED)
        code = code_for_status(exc.status)
        label = _LABELS.get(code, f"HTTP {exc.status}")
        detail = f" [{exc.code}]" if exc.code else ""
        return CliError(f"{label}: {exc.message}{detail}", code)
    if isinstance(exc, WorkflowAlreadyStartedError):
        run = f" (run {exc.run_id})" if exc.run_id else ""
        return CliError(
            f"already exists: workflow {exc.workflow_id!r} is already started{run}", ExitCode.ALREADY_EXISTS
        )
    if isinstance(exc, WorkflowFailureError):
        cause = exc.__cause__ or exc
        return CliError(f"workflow did not complete: {type(cause).__name__}: {cause}", ExitCode.FAILED)
    if isinstance(exc, httpx.TransportError):
        url = ""
        with contextlib.suppress(RuntimeError):  # an error raised before its request was built
            url = f" at {exc.request.url.copy_with(path='/', query=None)}"
        return CliError(
            f"server unavailable{url}: {type(exc).__name__}: {exc or 'no answer'}", ExitCode.UNAVAILABLE
        )
    return None
