"""The schedule spec: cron, intervals with offsets, calendars, time zones, bounds, jitter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from history.schedule_spec import compile_spec

T0 = datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC)  # a Monday


def _times(spec: dict[str, object], after: datetime, count: int) -> list[datetime]:
    return compile_spec(spec).upcoming(after, count, seed="s")


def test_cron_expression_in_utc() -> None:
    assert _times({"cron_expressions": ["*/15 * * * *"]}, T0, 3) == [
        T0 + timedelta(minutes=15),
        T0 + timedelta(minutes=30),
        T0 + timedelta(minutes=45),
    ]


def test_cron_expression_in_a_time_zone_follows_local_midnight() -> None:
    spec = {"cron_expressions": ["0 0 * * *"], "time_zone_name": "America/New_York"}
    # 2026-03-08 is the US spring-forward day: midnight moves from 05:00 UTC to 04:00 UTC.
    times = _times(spec, datetime(2026, 3, 6, 12, tzinfo=UTC), 3)
    assert times == [
        datetime(2026, 3, 7, 5, tzinfo=UTC),
        datetime(2026, 3, 8, 5, tzinfo=UTC),
        datetime(2026, 3, 9, 4, tzinfo=UTC),
    ]


def test_interval_is_aligned_to_the_epoch_plus_offset() -> None:
    spec = {"intervals": [{"every": 3600, "offset": 900}]}
    assert _times(spec, T0 + timedelta(minutes=20), 2) == [
        T0 + timedelta(hours=1, minutes=15),
        T0 + timedelta(hours=2, minutes=15),
    ]
    # exactly on a time: the next one, never the same instant again
    assert _times(spec, T0 + timedelta(minutes=15), 1) == [T0 + timedelta(hours=1, minutes=15)]


def test_calendar_defaults_and_ranges() -> None:
    weekdays_at_nine_thirty = {
        "calendars": [
            {"hour": [{"start": 9}], "minute": [{"start": 30}], "day_of_week": [{"start": 1, "end": 5}]}
        ]
    }
    friday_evening = datetime(2026, 3, 6, 18, tzinfo=UTC)
    assert _times(weekdays_at_nine_thirty, friday_evening, 2) == [
        datetime(2026, 3, 9, 9, 30, tzinfo=UTC),  # Monday
        datetime(2026, 3, 10, 9, 30, tzinfo=UTC),
    ]
    every_ten_seconds = {
        "calendars": [
            {
                "second": [{"start": 0, "end": 59, "step": 10}],
                "minute": [{"start": 0, "end": 59}],
                "hour": [{"start": 0, "end": 23}],
            }
        ]
    }
    assert _times(every_ten_seconds, T0 + timedelta(seconds=5), 2) == [
        T0 + timedelta(seconds=10),
        T0 + timedelta(seconds=20),
    ]


def test_calendar_in_a_time_zone_and_year() -> None:
    spec = {
        "calendars": [{"hour": [{"start": 8}], "month": [{"start": 12}], "day_of_month": [{"start": 25}]}],
        "time_zone_name": "Asia/Tokyo",
    }
    assert _times(spec, T0, 1) == [datetime(2026, 12, 24, 23, tzinfo=UTC)]
    spec["calendars"][0]["year"] = [{"start": 2030}]  # type: ignore[index]
    assert _times(spec, T0, 1) == [datetime(2030, 12, 24, 23, tzinfo=UTC)]


def test_union_of_specs_takes_the_earliest() -> None:
    spec = {"cron_expressions": ["0 * * * *"], "intervals": [{"every": 1200}]}
    assert _times(spec, T0, 4) == [T0 + timedelta(minutes=m) for m in (20, 40, 60, 80)]


def test_start_and_end_bound_the_times() -> None:
    spec = {
        "intervals": [{"every": 60}],
        "start_at": (T0 + timedelta(minutes=10)).isoformat(),
        "end_at": (T0 + timedelta(minutes=12)).isoformat(),
    }
    assert _times(spec, T0, 10) == [T0 + timedelta(minutes=m) for m in (10, 11, 12)]


def test_jitter_stays_within_bounds_and_is_stable() -> None:
    spec = compile_spec({"intervals": [{"every": 60}], "jitter": 10})
    nominals = [T0 + timedelta(minutes=m) for m in range(200)]
    offsets = [(spec.actual_time(n, "sched-a") - n).total_seconds() for n in nominals]
    assert all(0 <= o < 10 for o in offsets)
    assert max(offsets) - min(offsets) > 5  # spread, not a constant
    assert spec.actual_time(nominals[3], "sched-a") == spec.actual_time(nominals[3], "sched-a")
    assert spec.actual_time(nominals[3], "sched-a") != spec.actual_time(nominals[3], "sched-b")


def test_jitter_never_passes_the_next_nominal_time() -> None:
    spec = compile_spec({"intervals": [{"every": 2}], "jitter": 3600})
    for m in range(100):
        nominal = T0 + timedelta(seconds=2 * m)
        assert nominal <= spec.actual_time(nominal, "s") < nominal + timedelta(seconds=2)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "at least one"),
        ({"cron_expressions": ["not a cron"]}, "invalid cron"),
        ({"intervals": [{"every": 0.5}]}, "at least 1 second"),
        ({"intervals": [{"every": 60, "offset": 60}]}, "offset must be less"),
        ({"intervals": [{"every": 60}], "time_zone_name": "Mars/Olympus"}, "unknown time_zone_name"),
        ({"calendars": [{"hour": [{"start": 24}]}]}, "calendar.hour"),
        (
            {
                "intervals": [{"every": 60}],
                "start_at": "2026-01-02T00:00:00Z",
                "end_at": "2026-01-01T00:00:00Z",
            },
            "before",
        ),
        ({"intervals": [{"every": 60}], "jitter": -1}, "jitter"),
    ],
)
def test_bad_specs_are_refused_with_the_field(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compile_spec(spec)
