"""Exceptions ↔ Temporal-shaped failure dicts, both ways, keeping causes and stack traces."""

from __future__ import annotations

import traceback
from typing import Any

from sdk.converter import DataConverter, default_converter
from sdk.exceptions import (
    ActivityError,
    ApplicationError,
    ApplicationErrorCategory,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    RetryState,
    ServerError,
    TerminatedError,
    TimeoutError,
    TimeoutType,
)

SOURCE = "PythonSDK"
# Temporal's proto spelling; UNSPECIFIED is left out (null), as proto3 leaves defaults out.
CATEGORY_WIRE = {ApplicationErrorCategory.BENIGN: "APPLICATION_ERROR_CATEGORY_BENIGN"}
CATEGORY_FROM_WIRE = {wire: category for category, wire in CATEGORY_WIRE.items()}
MAX_CAUSE_DEPTH = 20


def exception_to_failure(
    exc: BaseException, converter: DataConverter = default_converter, *, _depth: int = 0
) -> dict[str, Any]:
    """Encode ``exc`` (and its ``__cause__`` chain) as a failure dict."""
    failure: dict[str, Any] = {
        "message": _message(exc),
        "source": SOURCE,
        "stack_trace": _stack_trace(exc),
        "cause": None,
    }
    failure.update(_failure_info(exc, converter))
    if exc.__cause__ is not None and _depth < MAX_CAUSE_DEPTH:
        failure["cause"] = exception_to_failure(exc.__cause__, converter, _depth=_depth + 1)
    return failure


def _message(exc: BaseException) -> str:
    if isinstance(exc, FailureError):
        return exc.message
    return str(exc.args[0]) if exc.args else str(exc)


def _stack_trace(exc: BaseException) -> str:
    """Where it was raised; for an error decoded from a failure and passed on (an activity's
    failure inside the run's), where it was first raised, as the failure recorded."""
    if exc.__traceback__ is not None:
        return "".join(traceback.format_tb(exc.__traceback__))
    recorded = exc._failure if isinstance(exc, FailureError) else None
    return str((recorded or {}).get("stack_trace") or "")


def _failure_info(exc: BaseException, converter: DataConverter) -> dict[str, Any]:
    if isinstance(exc, ApplicationError):
        return {
            "application_failure_info": {
                # Untyped, as Temporal sends it (so it reads back as just its message); a
                # subclass is typed by its class name, as any other exception is.
                "type": exc.type or ("" if type(exc) is ApplicationError else type(exc).__name__),
                "non_retryable": exc.non_retryable,
                "details": converter.to_payloads(exc.details),
                "next_retry_delay": exc.next_retry_delay,
                "category": CATEGORY_WIRE.get(exc.category),
            }
        }
    if isinstance(exc, CancelledError):
        return {"canceled_failure_info": {"details": converter.to_payloads(exc.details)}}
    if isinstance(exc, TimeoutError):
        return {
            "timeout_failure_info": {
                "timeout_type": exc.type.value if exc.type else None,
                "last_heartbeat_details": converter.to_payloads(exc.last_heartbeat_details),
            }
        }
    if isinstance(exc, TerminatedError):
        return {"terminated_failure_info": {}}
    if isinstance(exc, ServerError):
        return {"server_failure_info": {"non_retryable": exc.non_retryable}}
    if isinstance(exc, ActivityError):
        return {"activity_failure_info": _activity_info(exc)}
    if isinstance(exc, ChildWorkflowError):
        return {"child_workflow_execution_failure_info": _child_info(exc)}
    # Any other exception becomes an application failure typed by its class name, as Temporal does.
    return {
        "application_failure_info": {
            "type": type(exc).__name__,
            "non_retryable": False,
            "details": [],
            "next_retry_delay": None,
        }
    }


def _activity_info(exc: ActivityError) -> dict[str, Any]:
    return {
        "activity_type": exc.activity_type,
        "activity_id": exc.activity_id,
        "scheduled_event_id": exc.scheduled_event_id,
        "started_event_id": exc.started_event_id,
        "identity": exc.identity,
        "retry_state": exc.retry_state.value if exc.retry_state else None,
    }


def _child_info(exc: ChildWorkflowError) -> dict[str, Any]:
    return {
        "namespace": exc.namespace,
        "workflow_execution": {"workflow_id": exc.workflow_id, "run_id": exc.run_id},
        "workflow_type": exc.workflow_type,
        "initiated_event_id": exc.initiated_event_id,
        "started_event_id": exc.started_event_id,
        "retry_state": exc.retry_state.value if exc.retry_state else None,
    }


def failure_to_exception(
    failure: dict[str, Any] | None, converter: DataConverter = default_converter
) -> FailureError:
    """Decode a failure dict into the matching exception, its cause chained as ``__cause__``."""
    failure = failure or {"message": "unknown failure"}
    exc = _exception_for(failure, converter)
    exc._failure = failure
    if failure.get("cause"):
        exc.__cause__ = failure_to_exception(failure["cause"], converter)
    return exc


def retry_state_from_wire(value: Any) -> RetryState | None:
    """An event's or failure's ``retry_state`` (``RETRY_STATE_...``); None when absent or unknown."""
    try:
        return RetryState(value) if value else None
    except ValueError:
        return None


def timeout_type_from_wire(value: Any) -> TimeoutType | None:
    """A timeout failure's ``timeout_type``: the history records it bare (``START_TO_CLOSE``),
    Temporal's JSON with its prefix (``TIMEOUT_TYPE_START_TO_CLOSE``); both name one type."""
    if not isinstance(value, str) or not value:
        return None
    name = value if value.startswith("TIMEOUT_TYPE_") else f"TIMEOUT_TYPE_{value}"
    return TimeoutType(name) if name in TimeoutType._value2member_map_ else None


def _exception_for(failure: dict[str, Any], converter: DataConverter) -> FailureError:
    message = str(failure.get("message") or "")
    if (info := failure.get("application_failure_info")) is not None:
        return ApplicationError(
            message,
            *converter.from_payloads(info.get("details")),
            type=info.get("type"),
            non_retryable=bool(info.get("non_retryable")),
            next_retry_delay=info.get("next_retry_delay"),
            category=CATEGORY_FROM_WIRE.get(info.get("category"), ApplicationErrorCategory.UNSPECIFIED),
        )
    if (info := failure.get("canceled_failure_info")) is not None:
        return CancelledError(message, *converter.from_payloads(info.get("details")))
    if (info := failure.get("timeout_failure_info")) is not None:
        return TimeoutError(
            message,
            type=timeout_type_from_wire(info.get("timeout_type")),
            last_heartbeat_details=converter.from_payloads(info.get("last_heartbeat_details")),
        )
    if failure.get("terminated_failure_info") is not None:
        return TerminatedError(message)
    if (info := failure.get("server_failure_info")) is not None:
        return ServerError(message, non_retryable=bool(info.get("non_retryable")))
    if (info := failure.get("activity_failure_info")) is not None:
        return ActivityError(
            message or "Activity task failed",
            scheduled_event_id=int(info.get("scheduled_event_id") or 0),
            started_event_id=int(info.get("started_event_id") or 0),
            identity=str(info.get("identity") or ""),
            activity_type=str(info.get("activity_type") or ""),
            activity_id=str(info.get("activity_id") or ""),
            retry_state=retry_state_from_wire(info.get("retry_state")),
        )
    if (info := failure.get("child_workflow_execution_failure_info")) is not None:
        execution = info.get("workflow_execution") or {}
        return ChildWorkflowError(
            message or "Child workflow execution failed",
            namespace=str(info.get("namespace") or ""),
            workflow_id=str(execution.get("workflow_id") or ""),
            run_id=str(execution.get("run_id") or ""),
            workflow_type=str(info.get("workflow_type") or ""),
            initiated_event_id=int(info.get("initiated_event_id") or 0),
            started_event_id=int(info.get("started_event_id") or 0),
            retry_state=retry_state_from_wire(info.get("retry_state")),
        )
    return FailureError(message)
