"""Value types shared by client, worker and workflow code, with their wire spellings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any

from sdk.api.common.v1 import Payload


def to_seconds(value: timedelta | float | None) -> float | None:
    """Durations travel as float seconds; accept a timedelta or a number."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


@dataclass(frozen=True)
class RetryPolicy:
    """Temporal's retry policy; ``maximum_attempts`` 0 means unlimited."""

    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    maximum_interval: timedelta | None = None
    maximum_attempts: int = 0
    non_retryable_error_types: Sequence[str] | None = field(default=None)

    def to_wire(self) -> dict[str, Any]:
        return {
            "initial_interval": self.initial_interval.total_seconds(),
            "backoff_coefficient": self.backoff_coefficient,
            "maximum_interval": to_seconds(self.maximum_interval),
            "maximum_attempts": self.maximum_attempts,
            "non_retryable_error_types": list(self.non_retryable_error_types or []),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any] | None) -> RetryPolicy | None:
        if not data:
            return None
        maximum = data.get("maximum_interval")
        return cls(
            initial_interval=timedelta(seconds=float(data.get("initial_interval") or 1.0)),
            backoff_coefficient=float(data.get("backoff_coefficient") or 2.0),
            maximum_interval=timedelta(seconds=float(maximum)) if maximum else None,
            maximum_attempts=int(data.get("maximum_attempts") or 0),
            non_retryable_error_types=list(data.get("non_retryable_error_types") or []) or None,
        )


class WorkflowIDReusePolicy(str, Enum):
    """What a start may do when a closed execution already has the id (server spellings)."""

    ALLOW_DUPLICATE = "ALLOW_DUPLICATE"
    ALLOW_DUPLICATE_FAILED_ONLY = "ALLOW_DUPLICATE_FAILED_ONLY"
    REJECT_DUPLICATE = "REJECT_DUPLICATE"
    TERMINATE_IF_RUNNING = "TERMINATE_IF_RUNNING"


class WorkflowIDConflictPolicy(str, Enum):
    """What a start may do when a running execution already has the id (server spellings)."""

    UNSPECIFIED = ""
    FAIL = "FAIL"
    USE_EXISTING = "USE_EXISTING"
    TERMINATE_EXISTING = "TERMINATE_EXISTING"


class WorkflowExecutionStatus(str, Enum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TERMINATED = "TERMINATED"
    CONTINUED_AS_NEW = "CONTINUED_AS_NEW"
    TIMED_OUT = "TIMED_OUT"


@dataclass(frozen=True)
class RawValue:
    """A payload not yet converted: what dynamic handlers and dynamic workflows receive.

    Convert it with ``workflow.payload_converter().from_payload(raw.payload, MyType)``.
    """

    payload: Payload
