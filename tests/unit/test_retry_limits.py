"""A retry policy's arithmetic stays within what a datetime holds.

An infinite or century-long interval, or a coefficient steep enough to overflow a float
after a few attempts, used to pass validation and fail later, at the failure that asked
for a retry, with a 500 (or in the daemon that fires the retry timer).
"""

from __future__ import annotations

from typing import Any

import pytest

from history.kernel.retry import MAX_INTERVAL_SECONDS, backoff_seconds, normalize_retry_policy


@pytest.mark.parametrize(
    "policy",
    [
        {"initial_interval": "inf"},
        {"initial_interval": float("nan")},
        {"maximum_interval": 1e300},
        {"maximum_interval": MAX_INTERVAL_SECONDS + 1},
        {"backoff_coefficient": "Infinity"},
    ],
)
def test_an_interval_that_is_not_finite_or_past_a_hundred_years_is_refused(policy: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="finite"):
        normalize_retry_policy(policy)


def test_a_steep_coefficient_is_capped_not_overflowed() -> None:
    policy = normalize_retry_policy(
        {"initial_interval": 1, "backoff_coefficient": 1e300, "maximum_interval": 60}
    )
    assert backoff_seconds(policy, attempt=50) == 60.0
    assert backoff_seconds(normalize_retry_policy({"maximum_interval": MAX_INTERVAL_SECONDS}), 5000) == (
        MAX_INTERVAL_SECONDS
    )
