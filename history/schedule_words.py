"""A schedule spec in words, for people reading a schedule rather than writing one.

Pure logic beside ``schedule_spec``: cron expressions and calendars are first read into
the same sets of allowed values the engine fires on (``parse_cron`` and
``compile_spec``), then one describer turns those sets into a phrase, so "what the page
says" and "when it fires" cannot drift apart. Intervals, bounds, jitter and the time zone
get a phrase each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from history.cron import CronError, CronSchedule, parse_cron
from history.schedule_spec import Calendar, Interval, compile_spec

WEEKDAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# Up to this many times of day are listed one by one ("at 09:00 and 17:30").
MAX_LISTED_TIMES = 6
_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


@dataclass(frozen=True)
class TimeSets:
    """When in a day, and on which days, a cron expression or a calendar fires."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]
    years: frozenset[int] = frozenset()
    # Classic cron: when both day fields are restricted, a day matching either one fires.
    days_either: bool = False


def duration_in_words(seconds: float) -> str:
    """``5400`` → "1 hour 30 minutes"; under a second → "0.5 seconds"."""
    if seconds < 1:
        return f"{seconds:g} seconds"
    parts: list[str] = []
    rest = int(seconds)
    for name, size in _UNITS:
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
    return " ".join(parts)


def _runs(values: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted values folded into runs of consecutive numbers: 1,2,3,5 → (1,3),(5,5)."""
    runs: list[tuple[int, int]] = []
    for value in sorted(values):
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _joined(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _listed(values: frozenset[int], name: Any = str) -> str:
    """1,2,3,5 → "1 to 3 and 5" (names applied: "Monday to Friday")."""
    return _joined(
        [name(low) if low == high else f"{name(low)} to {name(high)}" for low, high in _runs(values)]
    )


def _step(values: frozenset[int], low: int, high: int) -> int | None:
    """The step n when ``values`` is exactly low, low+n, ... up to ``high`` (n > 1)."""
    ordered = sorted(values)
    if len(ordered) < 2 or ordered[0] != low:
        return None
    step = ordered[1] - ordered[0]
    if step < 2 or ordered != list(range(low, high + 1, step)):
        return None
    return step


def _field(values: frozenset[int], unit: str, low: int, high: int) -> str:
    """A minute or second field: "every minute", "every 15 minutes", "at minute 5 and 35"."""
    if values == frozenset(range(low, high + 1)):
        return f"every {unit}"
    step = _step(values, low, high)
    if step is not None:
        return f"every {step} {unit}s"
    return f"at {unit} {_listed(values)}"


def _time_of_day(sets: TimeSets) -> str:
    """The times within a day, as clock times when there are few of them."""
    count = len(sets.hours) * len(sets.minutes) * len(sets.seconds)
    if count <= MAX_LISTED_TIMES:
        with_seconds = sets.seconds != frozenset({0})
        times = [
            f"{h:02d}:{m:02d}" + (f":{s:02d}" if with_seconds else "")
            for h in sorted(sets.hours)
            for m in sorted(sets.minutes)
            for s in sorted(sets.seconds)
        ]
        return f"at {_joined(times)}"
    parts = []
    if sets.seconds != frozenset({0}):
        parts.append(_field(sets.seconds, "second", 0, 59))
    parts.append("on the hour" if sets.minutes == frozenset({0}) else _field(sets.minutes, "minute", 0, 59))
    if sets.hours != frozenset(range(24)):
        parts.append(f"in hours {_listed(sets.hours, lambda h: f'{h:02d}')}")
    return ", ".join(parts)


def _days(sets: TimeSets) -> str:
    all_dom, all_dow = sets.days_of_month == frozenset(range(1, 32)), sets.days_of_week == frozenset(range(7))
    weekdays = f"on {_listed(sets.days_of_week, lambda d: WEEKDAY_NAMES[d])}"
    month_days = f"on day {_listed(sets.days_of_month)} of the month"
    if all_dom and all_dow:
        phrase = "every day"
    elif all_dom:
        phrase = weekdays
    elif all_dow:
        phrase = month_days
    else:
        phrase = f"{month_days} {'or' if sets.days_either else 'if it is'} {weekdays.removeprefix('on ')}"
    if sets.months != frozenset(range(1, 13)):
        phrase += f", in {_listed(sets.months, lambda m: MONTH_NAMES[m - 1])}"
    if sets.years:
        phrase += f", in {_listed(sets.years)}"
    return phrase


def describe_time_sets(sets: TimeSets) -> str:
    """One phrase for a cron expression or calendar, e.g. "At 09:00 on Monday to Friday"."""
    time_of_day, days = _time_of_day(sets), _days(sets)
    if time_of_day.startswith("at "):
        text = f"{time_of_day} {days}"
    else:  # a recurring time ("every 15 minutes") needs no "every day" after it
        text = time_of_day if days == "every day" else f"{time_of_day}, {days}"
    return text[0].upper() + text[1:]


def _cron_sets(cron: CronSchedule) -> TimeSets:
    return TimeSets(
        seconds=frozenset({0}),
        minutes=cron.minutes,
        hours=cron.hours,
        days_of_month=cron.days,
        months=cron.months,
        days_of_week=cron.weekdays,
        days_either=not (cron.days_any or cron.weekdays_any),
    )


def _calendar_sets(calendar: Calendar) -> TimeSets:
    return TimeSets(
        seconds=calendar.seconds,
        minutes=calendar.minutes,
        hours=calendar.hours,
        days_of_month=calendar.days_of_month,
        months=calendar.months,
        days_of_week=calendar.days_of_week,
        years=calendar.years,
    )


def describe_cron(expr: str, time_zone: str = "UTC") -> str:
    """A cron expression in words (an unreadable one is quoted as it is)."""
    try:
        cron = parse_cron(expr, time_zone)
    except CronError:
        return f"Cron {expr!r}"
    if cron.every is not None:
        return f"Every {duration_in_words(cron.every.total_seconds())} after the previous time"
    words = describe_time_sets(_cron_sets(cron))
    zone = cron.zone.key
    return words + (f" ({zone})" if zone != time_zone else "")


def describe_interval(interval: Interval) -> str:
    text = f"Every {duration_in_words(interval.every.total_seconds())}"
    if interval.offset:
        text += f", offset by {duration_in_words(interval.offset.total_seconds())}"
    return text


def _instant(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def describe_spec(spec: dict[str, Any]) -> list[str]:
    """The spec as lines of words: one per cron, interval and calendar, then its bounds.

    Times of day are in the spec's time zone, which the last line names; a spec the
    engine would refuse is reported as such rather than guessed at.
    """
    try:
        compiled = compile_spec(spec)
    except ValueError as error:
        return [f"Unreadable spec: {error}"]
    zone = compiled.time_zone.key
    lines = [describe_cron(expr, zone) for expr in compiled.cron_expressions]
    lines += [describe_interval(interval) for interval in compiled.intervals]
    lines += [describe_time_sets(_calendar_sets(calendar)) for calendar in compiled.calendars]
    lines += _bounds(compiled.start_at, compiled.end_at, compiled.jitter)
    lines.append(f"Times in {zone}")
    return lines


def _bounds(start_at: datetime | None, end_at: datetime | None, jitter: timedelta) -> list[str]:
    lines = []
    if start_at is not None:
        lines.append(f"Not before {_instant(start_at)}")
    if end_at is not None:
        lines.append(f"Not after {_instant(end_at)}")
    if jitter:
        lines.append(f"Each time delayed by up to {duration_in_words(jitter.total_seconds())} of jitter")
    return lines


def spec_summary(spec: dict[str, Any]) -> str:
    """The firing rules on one line, for a list row (bounds and time zone left out)."""
    lines = describe_spec(spec)
    rules = [
        line for line in lines if not line.startswith(("Not before", "Not after", "Each time", "Times in"))
    ]
    return "; ".join(rules or lines)
