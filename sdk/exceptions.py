"""The SDK's exception hierarchy, named as Temporal names its own so ported code reads the same."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from enum import Enum, IntEnum
from typing import Any

from sdk.api.failure.v1 import Failure


class ChronicleError(Exception):
    """Base of every error the SDK raises on purpose."""

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class FailureError(ChronicleError):
    """An error that travels as a failure dict; raising one from a workflow fails the workflow."""

    def __init__(self, message: str, *, exc_args: tuple[Any, ...] | None = None) -> None:
        super().__init__(*(exc_args or (message,)))
        self._message = message
        self._failure: dict[str, Any] | None = None

    @property
    def message(self) -> str:
        """The message alone (``str()`` may add to it, as an ApplicationError's type)."""
        return self._message

    @property
    def failure(self) -> Failure | None:
        """The failure this error was decoded from, when it came from the server: Temporal's
        ``Failure`` attributes (``.message``, ``.stack_trace``, ``.cause``) over the wire dict."""
        return Failure(self._failure) if self._failure is not None else None

    @property
    def cause(self) -> BaseException | None:
        """The error beneath this one (an activity's or child's own failure), as Temporal names it."""
        return self.__cause__


class ApplicationErrorCategory(IntEnum):
    """How an application error is reported: ``BENIGN`` ones (an expected outcome, such as a
    poll that found nothing yet) are logged at DEBUG by the worker instead of WARNING."""

    UNSPECIFIED = 0
    BENIGN = 1


class ApplicationError(FailureError):
    """A user-raised failure: ``type`` drives retry decisions, ``details`` travel as payloads."""

    def __init__(
        self,
        message: str,
        *details: Any,
        type: str | None = None,
        non_retryable: bool = False,
        next_retry_delay: timedelta | float | None = None,
        category: ApplicationErrorCategory = ApplicationErrorCategory.UNSPECIFIED,
    ) -> None:
        # str() reads "type: message" when typed, as Temporal's does; .message is the message.
        super().__init__(message, exc_args=(f"{type}: {message}" if type else message,))
        self.details: Sequence[Any] = details
        self.type = type
        self.non_retryable = non_retryable
        self.next_retry_delay = (
            next_retry_delay.total_seconds() if isinstance(next_retry_delay, timedelta) else next_retry_delay
        )
        self.category = category


class CancelledError(FailureError):
    """The workflow or activity was cancelled."""

    def __init__(self, message: str = "Cancelled", *details: Any) -> None:
        super().__init__(message)
        self.details: Sequence[Any] = details


class TimeoutType(str, Enum):
    START_TO_CLOSE = "TIMEOUT_TYPE_START_TO_CLOSE"
    SCHEDULE_TO_START = "TIMEOUT_TYPE_SCHEDULE_TO_START"
    SCHEDULE_TO_CLOSE = "TIMEOUT_TYPE_SCHEDULE_TO_CLOSE"
    HEARTBEAT = "TIMEOUT_TYPE_HEARTBEAT"


class TimeoutError(FailureError):
    """A timeout fired; ``type`` says which one."""

    def __init__(
        self,
        message: str,
        *,
        type: TimeoutType | None,
        last_heartbeat_details: Sequence[Any] = (),
    ) -> None:
        super().__init__(message)
        self.type = type
        self.last_heartbeat_details = last_heartbeat_details


class TerminatedError(FailureError):
    """The execution was terminated from outside."""


class ServerError(FailureError):
    """A failure the server itself produced."""

    def __init__(self, message: str, *, non_retryable: bool = False) -> None:
        super().__init__(message)
        self.non_retryable = non_retryable


class RetryState(str, Enum):
    UNSPECIFIED = "RETRY_STATE_UNSPECIFIED"
    IN_PROGRESS = "RETRY_STATE_IN_PROGRESS"
    NON_RETRYABLE_FAILURE = "RETRY_STATE_NON_RETRYABLE_FAILURE"
    TIMEOUT = "RETRY_STATE_TIMEOUT"
    MAXIMUM_ATTEMPTS_REACHED = "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED"
    RETRY_POLICY_NOT_SET = "RETRY_STATE_RETRY_POLICY_NOT_SET"
    INTERNAL_SERVER_ERROR = "RETRY_STATE_INTERNAL_SERVER_ERROR"
    CANCEL_REQUESTED = "RETRY_STATE_CANCEL_REQUESTED"


class ActivityError(FailureError):
    """An activity failed; the reason is in ``cause``."""

    def __init__(
        self,
        message: str,
        *,
        scheduled_event_id: int,
        started_event_id: int,
        identity: str,
        activity_type: str,
        activity_id: str,
        retry_state: RetryState | None,
    ) -> None:
        super().__init__(message)
        self.scheduled_event_id = scheduled_event_id
        self.started_event_id = started_event_id
        self.identity = identity
        self.activity_type = activity_type
        self.activity_id = activity_id
        self.retry_state = retry_state


class ChildWorkflowError(FailureError):
    """A child workflow failed; the reason is in ``cause``."""

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        workflow_id: str,
        run_id: str,
        workflow_type: str,
        initiated_event_id: int,
        started_event_id: int,
        retry_state: RetryState | None,
    ) -> None:
        super().__init__(message)
        self.namespace = namespace
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.workflow_type = workflow_type
        self.initiated_event_id = initiated_event_id
        self.started_event_id = started_event_id
        self.retry_state = retry_state


class WorkflowFailureError(ChronicleError):
    """Raised by a client handle when the workflow it awaited did not complete."""

    def __init__(self, *, cause: BaseException) -> None:
        super().__init__("Workflow execution failed")
        self.__cause__ = cause

    @property
    def cause(self) -> BaseException:
        assert self.__cause__ is not None
        return self.__cause__


class WorkflowAlreadyStartedError(FailureError):
    """A start conflicted with a running (or reuse-forbidden) execution of the same id."""

    def __init__(self, workflow_id: str, workflow_type: str, *, run_id: str | None = None) -> None:
        super().__init__("Workflow execution already started")
        self.workflow_id = workflow_id
        self.workflow_type = workflow_type
        self.run_id = run_id


class NondeterminismError(ChronicleError):
    """Replayed workflow code issued commands that do not match the recorded history."""


class RestrictedWorkflowAccessError(NondeterminismError):
    """Workflow code called something nondeterministic (a wall clock, randomness, blocking I/O)
    while the determinism guard was on; the message names the deterministic replacement."""


class ReadOnlyContextError(ChronicleError):
    """Workflow code tried to issue a command where only reading is allowed (a query handler)."""


class QueryFailed(ChronicleError):
    """A query handler raised, or no handler exists for the query type."""


class RPCError(ChronicleError):
    """The server answered an HTTP call with an error status."""

    def __init__(self, message: str, *, status: int, code: str = "", details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.details = details


class WorkflowQueryFailedError(RPCError):
    """A query's handler raised, or the workflow has no handler for it (Temporal's name)."""


class WorkflowContinuedAsNewError(ChronicleError):
    """A client handle followed a run that continued as new and was told not to follow."""


class WorkflowUpdateFailedError(ChronicleError):
    """An update was rejected by its validator or its handler failed (Temporal's name);
    ``cause`` is the failure as an exception (an ``ApplicationError`` for a raise)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__("Workflow update failed")
        self.__cause__ = cause

    @property
    def cause(self) -> BaseException:
        assert self.__cause__ is not None
        return self.__cause__


class RPCTimeoutOrCancelledError(ChronicleError):
    """A call's time ran out (its ``rpc_timeout``) or it was cancelled before an answer came."""


class WorkflowUpdateRPCTimeoutOrCancelledError(RPCTimeoutOrCancelledError):
    """Waiting for an update's outcome ran out of time or was cancelled: the update itself may
    still complete (poll it again with ``get_update_handle``)."""

    def __init__(self) -> None:
        super().__init__("Timeout or cancellation waiting for update")
