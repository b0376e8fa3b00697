"""Cron expressions: parse them and compute the next matching time.

Pure Python with no Django, so the classic ``cron_schedule`` of a start and the
schedules feature share one implementation. The dialect is the one Temporal's
``cron_schedule`` accepts (the standard five-field parser):

* ``minute hour day-of-month month day-of-week`` with ``*``, ``?``, lists ``a,b``,
  ranges ``a-b``, steps ``*/n``, ``a/n`` and ``a-b/n``; month and weekday names
  (``JAN``, ``MON``); weekday 7 is Sunday too;
* shorthands ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily``
  (``@midnight``), ``@hourly``, and ``@every <duration>`` (``@every 90s``,
  ``@every 1h30m``), which fires every whole-second interval after the last time;
* an optional ``CRON_TZ=<zone>`` or ``TZ=<zone>`` prefix; times are UTC otherwise.

Day-of-month and day-of-week follow classic cron: when both are restricted a day
matching either one matches; when one is ``*`` only the other counts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "CronError",
    "CronSchedule",
    "cron_backoff_seconds",
    "next_cron_time",
    "parse_cron",
    "validate_cron",
]

_MONTH_NAMES = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC"
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES.split(), 1)}
_WEEKDAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_SHORTHANDS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
# No schedule is sparser than one day a year; years past this many are a bad expression.
_SEARCH_YEARS = 8


class CronError(ValueError):
    """The expression cannot be parsed; the message says which part and why."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 0, 7, _WEEKDAYS),
)


@dataclass(frozen=True)
class CronSchedule:
    """A parsed expression: the allowed values of each field, or a constant interval."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_any: bool
    weekdays_any: bool
    zone: ZoneInfo
    every: timedelta | None = None

    def next_after(self, after: datetime) -> datetime:
        """The first matching time strictly after ``after`` (an aware datetime), in UTC."""
        if after.tzinfo is None:
            raise ValueError("after must be timezone-aware")
        if self.every is not None:
            return (after.replace(microsecond=0) + self.every).astimezone(UTC)
        local = after.astimezone(self.zone).replace(tzinfo=None, second=0, microsecond=0)
        candidate = local + timedelta(minutes=1)
        limit = candidate + timedelta(days=366 * _SEARCH_YEARS)
        while candidate < limit:
            if candidate.month not in self.months:
                candidate = _first_of_next_month(candidate)
            elif not self._day_matches(candidate):
                candidate = candidate.replace(hour=0, minute=0) + timedelta(days=1)
            elif candidate.hour not in self.hours:
                candidate = candidate.replace(minute=0) + timedelta(hours=1)
            elif candidate.minute not in self.minutes:
                candidate += timedelta(minutes=1)
            else:
                found = _to_utc(candidate, self.zone)
                if found is not None and found > after:
                    return found
                candidate += timedelta(minutes=1)  # a wall time the zone skips or repeats
        raise CronError("the expression never matches")

    def _day_matches(self, moment: datetime) -> bool:
        day_ok = moment.day in self.days
        weekday_ok = (moment.isoweekday() % 7) in self.weekdays
        if self.days_any or self.weekdays_any:
            return day_ok and weekday_ok
        return day_ok or weekday_ok


def _first_of_next_month(moment: datetime) -> datetime:
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return moment.replace(year=year, month=month, day=1, hour=0, minute=0)


def _to_utc(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """The UTC instant of a local wall time, or None when the zone skips it (DST gap)."""
    aware = wall.replace(tzinfo=zone)
    instant = aware.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != wall:
        return None
    return instant


def parse_cron(expr: str, tz: str = "UTC") -> CronSchedule:
    """Parse ``expr``; raise :class:`CronError` with a readable message when it is invalid."""
    text = expr.strip()
    zone_name = tz
    if text.startswith(("CRON_TZ=", "TZ=")):
        prefix, _, text = text.partition(" ")
        zone_name = prefix.split("=", 1)[1]
        text = text.strip()
    zone = _zone(zone_name)
    if text.startswith("@every"):
        return _every(text[len("@every") :].strip(), zone)
    text = _SHORTHANDS.get(text.lower(), text)
    parts = text.split()
    if len(parts) != len(_FIELDS):
        raise CronError(f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}")
    values = [_parse_field(part, spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    (minutes, _), (hours, _), (days, days_any), (months, _), (weekdays, weekdays_any) = values
    return CronSchedule(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(d % 7 for d in weekdays),
        days_any=days_any,
        weekdays_any=weekdays_any,
        zone=zone,
    )


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name!r}") from None


def _every(text: str, zone: ZoneInfo) -> CronSchedule:
    seconds = _duration_seconds(text)
    # Whole seconds, at least one (the standard parser's rule).
    interval = timedelta(seconds=max(1, math.floor(seconds)))
    everything = frozenset[int]()
    return CronSchedule(
        everything, everything, everything, everything, everything, True, True, zone, interval
    )


def _duration_seconds(text: str) -> float:
    """A Go-style duration: ``90s``, ``1h30m``, ``1.5h``, ``500ms``."""
    if not text or _DURATION_PART.sub("", text):
        raise CronError(f"@every needs a duration such as 30s or 1h30m, got {text!r}")
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in _DURATION_PART.findall(text))


def _parse_field(text: str, spec: _Field) -> tuple[frozenset[int], bool]:
    """The field's allowed values, and whether it is unrestricted (``*`` or ``?``)."""
    values: set[int] = set()
    unrestricted = False
    for item in text.split(","):
        chosen, star = _parse_item(item, spec)
        values |= chosen
        unrestricted = unrestricted or star
    return frozenset(values), unrestricted


def _parse_item(item: str, spec: _Field) -> tuple[set[int], bool]:
    base, slash, step_text = item.partition("/")
    step = _number(step_text, spec, what="step") if slash else 1
    if slash and step < 1:
        raise CronError(f"{spec.name}: step must be at least 1 in {item!r}")
    star = base in ("*", "?")
    if star:
        low, high = spec.low, spec.high
    elif "-" in base:
        start, _, end = base.partition("-")
        low, high = _value(start, spec), _value(end, spec)
    else:
        low = _value(base, spec)
        high = spec.high if slash else low  # "a/n" means from a to the end
    if low > high:
        raise CronError(f"{spec.name}: range {item!r} runs backwards")
    return set(range(low, high + 1, step)), star and step == 1


def _value(text: str, spec: _Field) -> int:
    if spec.names and text.upper() in spec.names:
        return spec.names[text.upper()]
    value = _number(text, spec, what="value")
    if not spec.low <= value <= spec.high:
        raise CronError(f"{spec.name}: {value} is outside {spec.low}-{spec.high}")
    return value


def _number(text: str, spec: _Field, *, what: str) -> int:
    if not text.isdigit():
        raise CronError(f"{spec.name}: {what} {text!r} is not a number")
    return int(text)


def next_cron_time(expr: str, after: datetime, tz: str = "UTC") -> datetime:
    """The first time ``expr`` matches strictly after ``after``, in UTC."""
    return parse_cron(expr, tz).next_after(after)


def cron_backoff_seconds(expr: str, scheduled: datetime, now: datetime) -> float:
    """Seconds from ``now`` to the run after the one scheduled at ``scheduled``.

    Temporal's rule: the next time follows the previous *scheduled* time; times that
    have already passed are skipped, and the wait is rounded up to whole seconds.
    """
    schedule = parse_cron(expr)
    moment = schedule.next_after(scheduled)
    if moment < now and schedule.every is not None:
        missed = math.ceil((now - moment) / schedule.every)
        moment += missed * schedule.every
    elif moment < now:
        moment = schedule.next_after(now - timedelta(microseconds=1))
    return float(math.ceil((moment - now).total_seconds()))


def validate_cron(expr: str) -> None:
    """Raise :class:`CronError` unless ``expr`` parses and matches some time from now on."""
    parse_cron(expr).next_after(datetime.now(UTC))
