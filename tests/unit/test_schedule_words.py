"""The schedule describer: cron expressions, intervals and calendars in words."""

from __future__ import annotations

import pytest

from history.schedule_words import describe_spec, duration_in_words, spec_summary
from namespaces.rate_limits import NAMESPACE_LIMIT, QUEUE_LIMIT, UNLIMITED, dispatch_limit_in_force


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"cron_expressions": ["0 9 * * 1-5"]}, "At 09:00 on Monday to Friday"),
        ({"cron_expressions": ["*/15 * * * *"]}, "Every 15 minutes"),
        ({"cron_expressions": ["@hourly"]}, "On the hour"),
        ({"cron_expressions": ["@every 90s"]}, "Every 1 minute 30 seconds after the previous time"),
        ({"cron_expressions": ["0 0 1,15 * MON"]}, "At 00:00 on day 1 and 15 of the month or Monday"),
        ({"cron_expressions": ["30 2 * 1,7 *"]}, "At 02:30 every day, in January and July"),
        ({"intervals": [{"every": 3600, "offset": 900}]}, "Every 1 hour, offset by 15 minutes"),
        (
            {
                "calendars": [
                    {"minute": [{"start": 0, "end": 59, "step": 5}], "hour": [{"start": 9, "end": 17}]}
                ]
            },
            "Every 5 minutes, in hours 09 to 17",
        ),
        (
            {"calendars": [{"day_of_week": [{"start": 6}], "year": [{"start": 2027}]}]},
            "At 00:00 on Saturday, in 2027",
        ),
    ],
)
def test_each_rule_reads_as_words(spec: dict[str, object], words: str) -> None:
    assert describe_spec(spec)[0] == words
    assert spec_summary(spec) == words


def test_bounds_jitter_and_time_zone_get_a_line_each_but_stay_out_of_the_summary() -> None:
    spec = {
        "intervals": [{"every": 86400}],
        "start_at": "2026-01-01T00:00:00+00:00",
        "jitter": 30,
        "time_zone_name": "Europe/Paris",
    }
    assert describe_spec(spec) == [
        "Every 1 day",
        "Not before 2026-01-01 00:00:00 UTC",
        "Each time delayed by up to 30 seconds of jitter",
        "Times in Europe/Paris",
    ]
    assert spec_summary(spec) == "Every 1 day"


def test_a_spec_the_engine_refuses_says_so() -> None:
    assert describe_spec({"cron_expressions": ["61 * * * *"]})[0].startswith("Unreadable spec: invalid cron")


def test_durations() -> None:
    assert duration_in_words(5400) == "1 hour 30 minutes"
    assert duration_in_words(86400 * 365) == "365 days"
    assert duration_in_words(0.5) == "0.5 seconds"


def test_the_tighter_dispatch_limit_is_in_force() -> None:
    assert (dispatch_limit_in_force(50, 5).rps, dispatch_limit_in_force(50, 5).source) == (5, QUEUE_LIMIT)
    assert (dispatch_limit_in_force(5, 50).rps, dispatch_limit_in_force(5, 50).source) == (5, NAMESPACE_LIMIT)
    assert dispatch_limit_in_force(0, 7).source == QUEUE_LIMIT
    assert dispatch_limit_in_force(9, 0).source == NAMESPACE_LIMIT
    assert (dispatch_limit_in_force(0, 0).rps, dispatch_limit_in_force(0, 0).source) == (0, UNLIMITED)
