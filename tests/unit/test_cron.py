"""Cron expressions: parsing, next times, time zones and Temporal's backoff rule; no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from history.cron import CronError, cron_backoff_seconds, next_cron_time, parse_cron, validate_cron


def at(text: str) -> datetime:
    return (
        datetime.fromisoformat(text).replace(tzinfo=UTC) if "+" not in text else datetime.fromisoformat(text)
    )


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("* * * * *", "2026-03-01T10:00:00", "2026-03-01T10:01:00"),
        ("* * * * *", "2026-03-01T10:00:59.999", "2026-03-01T10:01:00"),
        ("*/15 * * * *", "2026-03-01T10:01:00", "2026-03-01T10:15:00"),
        ("*/15 * * * *", "2026-03-01T10:45:00", "2026-03-01T11:00:00"),
        ("5/20 * * * *", "2026-03-01T10:30:00", "2026-03-01T10:45:00"),
        ("10-20/5 * * * *", "2026-03-01T10:16:00", "2026-03-01T10:20:00"),
        ("0 9 * * *", "2026-03-01T09:00:00", "2026-03-02T09:00:00"),
        ("0 9,17 * * *", "2026-03-01T09:00:00", "2026-03-01T17:00:00"),
        ("0 0 1 * *", "2026-01-31T12:00:00", "2026-02-01T00:00:00"),
        ("0 0 31 * *", "2026-04-01T00:00:00", "2026-05-31T00:00:00"),  # April has no 31st
        ("0 0 29 2 *", "2026-03-01T00:00:00", "2028-02-29T00:00:00"),  # next leap year
        ("0 12 * JAN-MAR MON", "2026-03-31T13:00:00", "2027-01-04T12:00:00"),
        ("0 12 * * MON-FRI", "2026-03-06T12:00:00", "2026-03-09T12:00:00"),  # Friday -> Monday
        ("0 0 * * 7", "2026-03-01T00:00:00", "2026-03-08T00:00:00"),  # 7 is Sunday too
        ("0 0 * * 0", "2026-03-01T00:00:00", "2026-03-08T00:00:00"),
        ("0 0 ? * SUN", "2026-03-02T00:00:00", "2026-03-08T00:00:00"),
        ("@hourly", "2026-03-01T10:30:00", "2026-03-01T11:00:00"),
        ("@daily", "2026-03-01T10:30:00", "2026-03-02T00:00:00"),
        ("@midnight", "2026-03-01T10:30:00", "2026-03-02T00:00:00"),
        ("@weekly", "2026-03-02T00:00:00", "2026-03-08T00:00:00"),
        ("@monthly", "2026-03-02T00:00:00", "2026-04-01T00:00:00"),
        ("@yearly", "2026-03-02T00:00:00", "2027-01-01T00:00:00"),
        ("@annually", "2026-03-02T00:00:00", "2027-01-01T00:00:00"),
        ("@every 90s", "2026-03-01T10:00:00.700", "2026-03-01T10:01:30"),
        ("@every 1h30m", "2026-03-01T10:00:00", "2026-03-01T11:30:00"),
        ("@every 500ms", "2026-03-01T10:00:00.200", "2026-03-01T10:00:01"),  # at least a second
    ],
)
def test_next_time(expr: str, after: str, expected: str) -> None:
    assert next_cron_time(expr, at(after)) == at(expected)


def test_both_day_fields_restricted_match_either() -> None:
    # Classic cron: the 13th of the month OR any Friday.
    times = [at("2026-03-01T00:00:00")]
    for _ in range(4):
        times.append(next_cron_time("0 0 13 * FRI", times[-1]))
    assert [t.day for t in times[1:]] == [6, 13, 20, 27]


def test_one_star_day_field_makes_the_other_decide() -> None:
    assert next_cron_time("0 0 13 * *", at("2026-03-01T00:00:00")).day == 13
    assert next_cron_time("0 0 * * FRI", at("2026-03-01T00:00:00")).day == 6
    # "*/2" in day-of-month is a restriction, not a star: either field may match.
    assert next_cron_time("0 0 */2 * FRI", at("2026-03-01T00:00:00")).day == 3


def test_time_zone_argument_and_prefix_agree() -> None:
    after = at("2026-07-01T00:00:00")
    expected = at("2026-07-01T13:00:00")  # 09:00 in New York (EDT, UTC-4)
    assert next_cron_time("0 9 * * *", after, tz="America/New_York") == expected
    assert next_cron_time("CRON_TZ=America/New_York 0 9 * * *", after) == expected
    assert next_cron_time("TZ=America/New_York 0 9 * * *", after) == expected


def test_winter_and_summer_offsets() -> None:
    after = at("2026-01-10T00:00:00")
    assert next_cron_time("0 9 * * *", after, tz="Europe/Paris") == at("2026-01-10T08:00:00")
    after = at("2026-07-10T00:00:00")
    assert next_cron_time("0 9 * * *", after, tz="Europe/Paris") == at("2026-07-10T07:00:00")


def test_a_wall_time_skipped_by_daylight_saving_is_skipped() -> None:
    # 2026-03-29 02:30 does not exist in Paris; the next 02:30 is the day after.
    after = at("2026-03-28T12:00:00")
    assert next_cron_time("30 2 * * *", after, tz="Europe/Paris") == at("2026-03-30T00:30:00")


def test_result_is_strictly_after_and_in_utc() -> None:
    after = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    result = next_cron_time("0 10 * * *", after)
    assert result > after and result.tzinfo == UTC


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("", "expected 5 fields"),
        ("* * * *", "expected 5 fields"),
        ("* * * * * *", "expected 5 fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour: 24 is outside 0-23"),
        ("* * 0 * *", "day-of-month: 0 is outside 1-31"),
        ("* * * 13 *", "month: 13 is outside 1-12"),
        ("* * * * 8", "day-of-week: 8 is outside 0-7"),
        ("*/0 * * * *", "step must be at least 1"),
        ("30-10 * * * *", "runs backwards"),
        ("x * * * *", "not a number"),
        ("* * * FOO *", "not a number"),
        ("@every", "@every needs a duration"),
        ("@every 5 minutes", "@every needs a duration"),
        ("CRON_TZ=Mars/Olympus * * * * *", "unknown time zone"),
        ("@sometimes", "expected 5 fields"),
    ],
)
def test_bad_expressions_say_what_is_wrong(expr: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        parse_cron(expr)


def test_an_expression_that_never_matches_is_refused() -> None:
    with pytest.raises(CronError, match="never matches"):
        validate_cron("0 0 30 2 *")  # 30 February
    validate_cron("*/5 * * * *")


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_cron_time("* * * * *", datetime(2026, 1, 1, tzinfo=UTC).replace(tzinfo=None))


def test_backoff_waits_for_the_next_time_rounded_up_to_seconds() -> None:
    now = at("2026-03-01T10:00:20.250")
    assert cron_backoff_seconds("* * * * *", now, now) == 40.0
    assert cron_backoff_seconds("*/5 * * * *", now, now) == 280.0


def test_backoff_follows_the_scheduled_time_and_skips_missed_times() -> None:
    scheduled = at("2026-03-01T10:00:00")
    # The run ran 3.5 minutes: 10:01, 10:02 and 10:03 were missed; the next is 10:04.
    assert cron_backoff_seconds("* * * * *", scheduled, scheduled + timedelta(minutes=3.5)) == 30.0
    # A constant interval keeps its phase from the scheduled time.
    assert cron_backoff_seconds("@every 10s", scheduled, scheduled + timedelta(seconds=25)) == 5.0
    assert cron_backoff_seconds("@every 10s", scheduled, scheduled + timedelta(seconds=3)) == 7.0
