"""Pure retry and timeout arithmetic (Temporal's rules), unit-tested without a database."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

DEFAULT_INITIAL_INTERVAL = 1.0
DEFAULT_BACKOFF = 2.0

# Workflow task retries (temporal-semantics §3.5): the first retries go out at once;
# from attempt 4 on each waits an exponential delay from 5 s, capped at 10 minutes,
# so a workflow whose code keeps failing costs a few tasks a minute, not 25 a second.
WFT_RETRY_BACKOFF_FROM_ATTEMPT = 4
WFT_RETRY_INITIAL_INTERVAL = 5.0
WFT_RETRY_MAXIMUM_INTERVAL = 600.0
# The longest interval a policy may name: a hundred years (the API's bound on durations).
# Past it, or infinite, the next attempt's moment no longer fits a datetime.
MAX_INTERVAL_SECONDS = 100 * 365.25 * 86400


def workflow_task_retry_delay(attempt: int) -> float:
    """Seconds before workflow task ``attempt`` may be dispatched (0 for the first attempts)."""
    if attempt < WFT_RETRY_BACKOFF_FROM_ATTEMPT:
        return 0.0
    steps = min(attempt - WFT_RETRY_BACKOFF_FROM_ATTEMPT, 32)
    return float(min(WFT_RETRY_INITIAL_INTERVAL * 2**steps, WFT_RETRY_MAXIMUM_INTERVAL))


def normalize_retry_policy(policy: dict[str, Any] | None) -> dict[str, Any]:
    """Fill Temporal's defaults and validate; raise ValueError on a bad policy."""
    policy = dict(policy or {})
    initial = float(policy.get("initial_interval") or DEFAULT_INITIAL_INTERVAL)
    coefficient = float(policy.get("backoff_coefficient") or DEFAULT_BACKOFF)
    maximum = float(policy.get("maximum_interval") or 100 * initial)
    attempts = int(policy.get("maximum_attempts") or 0)
    types = policy.get("non_retryable_error_types") or []
    if not all(math.isfinite(v) for v in (initial, coefficient, maximum)) or maximum > MAX_INTERVAL_SECONDS:
        raise ValueError("retry intervals must be finite and at most a hundred years; the coefficient finite")
    if initial <= 0:
        raise ValueError("initial_interval must be positive")
    if coefficient < 1:
        raise ValueError("backoff_coefficient must be >= 1")
    if maximum < initial:
        raise ValueError("maximum_interval must be >= initial_interval")
    if attempts < 0:
        raise ValueError("maximum_attempts must not be negative")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise ValueError("non_retryable_error_types must be a list of strings")
    return {
        "initial_interval": initial,
        "backoff_coefficient": coefficient,
        "maximum_interval": maximum,
        "maximum_attempts": attempts,
        "non_retryable_error_types": types,
    }


def backoff_seconds(policy: dict[str, Any], attempt: int, next_retry_delay: float | None = None) -> float:
    """Delay after ``attempt`` failed: initial × coefficient^(attempt−1), capped."""
    if next_retry_delay is not None:
        return min(float(next_retry_delay), float(policy["maximum_interval"]))
    try:
        delay = policy["initial_interval"] * policy["backoff_coefficient"] ** (attempt - 1)
    except OverflowError:  # a steep coefficient after many attempts: the cap applies
        delay = policy["maximum_interval"]
    return float(min(delay, policy["maximum_interval"]))


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    retry_state: str
    delay: float = 0.0


def decide_retry(
    policy: dict[str, Any],
    *,
    attempt: int,
    failure: dict[str, Any],
    now: datetime,
    expiration: datetime | None,
) -> RetryDecision:
    """Whether a failed attempt is retried, and after how long."""
    info = failure.get("application_failure_info") or {}
    if info.get("non_retryable") or failure.get("non_retryable"):
        return RetryDecision(False, "RETRY_STATE_NON_RETRYABLE_FAILURE")
    failure_type = info.get("type") or failure.get("type") or ""
    if failure_type and failure_type in policy["non_retryable_error_types"]:
        return RetryDecision(False, "RETRY_STATE_NON_RETRYABLE_FAILURE")
    if policy["maximum_attempts"] and attempt >= policy["maximum_attempts"]:
        return RetryDecision(False, "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED")
    delay = backoff_seconds(policy, attempt, info.get("next_retry_delay"))
    if expiration is not None and now + timedelta(seconds=delay) >= expiration:
        return RetryDecision(False, "RETRY_STATE_TIMEOUT")
    return RetryDecision(True, "RETRY_STATE_IN_PROGRESS", delay)


@dataclass(frozen=True)
class ActivityTimeouts:
    schedule_to_close: float
    schedule_to_start: float
    start_to_close: float
    heartbeat: float


def normalize_activity_timeouts(
    *,
    schedule_to_close: float,
    schedule_to_start: float,
    start_to_close: float,
    heartbeat: float,
    run_timeout: float,
) -> ActivityTimeouts:
    """Temporal's normalisation (temporal-semantics §4.1); 0 means unset/unlimited."""
    if schedule_to_close <= 0 and start_to_close <= 0:
        raise ValueError("set schedule_to_close_timeout or start_to_close_timeout")
    if schedule_to_close > 0:
        schedule_to_start = (
            min(schedule_to_start, schedule_to_close) if schedule_to_start > 0 else schedule_to_close
        )
        start_to_close = min(start_to_close, schedule_to_close) if start_to_close > 0 else schedule_to_close
    else:
        schedule_to_close = run_timeout
        if schedule_to_start <= 0:
            schedule_to_start = run_timeout
    if run_timeout > 0:
        cap = run_timeout
        schedule_to_close = min(schedule_to_close, cap) if schedule_to_close > 0 else cap
        schedule_to_start = min(schedule_to_start, cap) if schedule_to_start > 0 else cap
        start_to_close = min(start_to_close, cap)
    if heartbeat > 0:
        heartbeat = min(heartbeat, start_to_close)
    return ActivityTimeouts(schedule_to_close, schedule_to_start, start_to_close, max(0.0, heartbeat))


def effective_run_timeout(execution_timeout: float, run_timeout: float) -> float:
    """If one is set it wins; if both, their minimum (temporal-semantics §0)."""
    if execution_timeout > 0 and run_timeout > 0:
        return min(execution_timeout, run_timeout)
    return run_timeout or execution_timeout
