"""Retry and timeout arithmetic: pure functions, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from history.kernel.retry import (
    backoff_seconds,
    decide_retry,
    effective_run_timeout,
    normalize_activity_timeouts,
    normalize_retry_policy,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_default_policy_matches_temporal() -> None:
    policy = normalize_retry_policy(None)

    assert policy == {
        "initial_interval": 1.0,
        "backoff_coefficient": 2.0,
        "maximum_interval": 100.0,
        "maximum_attempts": 0,
        "non_retryable_error_types": [],
    }


@pytest.mark.parametrize(("attempt", "delay"), [(1, 1.0), (2, 2.0), (3, 4.0), (8, 100.0)])
def test_backoff_grows_and_is_capped(attempt: int, delay: float) -> None:
    assert backoff_seconds(normalize_retry_policy(None), attempt) == delay


def test_next_retry_delay_replaces_computed_delay_but_is_capped() -> None:
    policy = normalize_retry_policy({"maximum_interval": 10})

    assert backoff_seconds(policy, 1, next_retry_delay=3) == 3
    assert backoff_seconds(policy, 1, next_retry_delay=30) == 10


@pytest.mark.parametrize(
    "bad",
    [
        {"backoff_coefficient": 0.5},
        {"initial_interval": 5, "maximum_interval": 1},
        {"maximum_attempts": -1},
        {"non_retryable_error_types": "X"},
    ],
)
def test_bad_policies_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        normalize_retry_policy(bad)


def test_maximum_attempts_counts_the_first_attempt() -> None:
    policy = normalize_retry_policy({"maximum_attempts": 3})
    failure = {"message": "x"}

    assert decide_retry(policy, attempt=2, failure=failure, now=NOW, expiration=None).retry
    decision = decide_retry(policy, attempt=3, failure=failure, now=NOW, expiration=None)
    assert not decision.retry and decision.retry_state == "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED"


def test_non_retryable_type_matches_exactly() -> None:
    policy = normalize_retry_policy({"non_retryable_error_types": ["Fatal"]})

    fatal = decide_retry(policy, attempt=1, failure={"type": "Fatal"}, now=NOW, expiration=None)
    other = decide_retry(policy, attempt=1, failure={"type": "FatalError"}, now=NOW, expiration=None)
    assert fatal.retry_state == "RETRY_STATE_NON_RETRYABLE_FAILURE" and other.retry


def test_retry_past_expiration_is_not_attempted() -> None:
    policy = normalize_retry_policy(None)

    decision = decide_retry(policy, attempt=3, failure={}, now=NOW, expiration=NOW + timedelta(seconds=2))
    assert not decision.retry and decision.retry_state == "RETRY_STATE_TIMEOUT"


def test_activity_timeouts_are_normalised_from_schedule_to_close() -> None:
    t = normalize_activity_timeouts(
        schedule_to_close=30, schedule_to_start=0, start_to_close=0, heartbeat=60, run_timeout=0
    )

    assert (t.schedule_to_start, t.start_to_close, t.heartbeat) == (30, 30, 30)


def test_activity_timeouts_are_capped_by_run_timeout() -> None:
    t = normalize_activity_timeouts(
        schedule_to_close=0, schedule_to_start=0, start_to_close=500, heartbeat=0, run_timeout=100
    )

    assert (t.schedule_to_close, t.schedule_to_start, t.start_to_close) == (100, 100, 100)


def test_an_activity_needs_one_of_the_close_timeouts() -> None:
    with pytest.raises(ValueError):
        normalize_activity_timeouts(
            schedule_to_close=0, schedule_to_start=5, start_to_close=0, heartbeat=0, run_timeout=0
        )


@pytest.mark.parametrize(
    ("execution", "run", "expected"), [(0, 0, 0), (60, 0, 60), (0, 30, 30), (60, 30, 30)]
)
def test_effective_run_timeout(execution: float, run: float, expected: float) -> None:
    assert effective_run_timeout(execution, run) == expected


def test_workflow_task_retries_back_off_after_the_first_attempts() -> None:
    from history.kernel.retry import workflow_task_retry_delay

    assert [workflow_task_retry_delay(a) for a in (1, 2, 3)] == [0.0, 0.0, 0.0]
    assert [workflow_task_retry_delay(a) for a in (4, 5, 6)] == [5.0, 10.0, 20.0]
    assert workflow_task_retry_delay(40) == 600.0
    assert workflow_task_retry_delay(10_000) == 600.0
