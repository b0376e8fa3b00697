"""When a schedule fires: cron expressions, intervals and calendars in a time zone.

A spec is read from its JSON wire shape once (``compile_spec``), which refuses what it
cannot honour with a ``ValueError`` naming the field, so a bad spec becomes a 4xx at
create time instead of a schedule that never fires. The compiled spec answers one
question, "the next *nominal* time after t", the union of its cron expressions,
intervals and calendars clipped to ``start_at``/``end_at``. The *actual* time adds a
jitter that is a pure function of the schedule and the nominal time, so every firing
transaction (and every retry of one) computes the same instant.

Intervals are aligned to the Unix epoch plus their offset, as Temporal aligns them, so
``every=1h, offset=15m`` fires at a quarter past each hour whatever the creation time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from history.cron import CronError, next_cron_time, parse_cron

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Calendar fields in wire order with their ranges and Temporal's defaults.
_CALENDAR_FIELDS: dict[str, tuple[int, int, tuple[int, int]]] = {
    "second": (0, 59, (0, 0)),
    "minute": (0, 59, (0, 0)),
    "hour": (0, 23, (0, 0)),
    "day_of_month": (1, 31, (1, 31)),
    "month": (1, 12, (1, 12)),
    "day_of_week": (0, 6, (0, 6)),
}
_MAX_CALENDAR_DAYS = 366 * 8  # a calendar that matches nothing in 8 years matches nothing


@dataclass(frozen=True)
class Interval:
    every: timedelta
    offset: timedelta = timedelta(0)

    def next_after(self, after: datetime) -> datetime:
        step = self.every.total_seconds()
        since = (after - EPOCH - self.offset).total_seconds()
        k = int(since // step) + 1
        return EPOCH + self.offset + timedelta(seconds=k * step)


@dataclass(frozen=True)
class Calendar:
    """Sets of allowed values per field; an empty ``years`` set allows every year."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]  # 0 = Sunday, as in cron and Temporal
    years: frozenset[int] = frozenset()

    def matches_day(self, day: date) -> bool:
        return (
            day.month in self.months
            and day.day in self.days_of_month
            and (day.isoweekday() % 7) in self.days_of_week
            and (not self.years or day.year in self.years)
        )

    def next_after(self, after: datetime, tz: ZoneInfo) -> datetime | None:
        local = after.astimezone(tz)
        day = local.date()
        for _ in range(_MAX_CALENDAR_DAYS):
            if self.matches_day(day):
                found = self._first_in_day(day, local, tz)
                if found is not None:
                    return found
            day += timedelta(days=1)
        return None

    def _first_in_day(self, day: date, after_local: datetime, tz: ZoneInfo) -> datetime | None:
        for hour in sorted(self.hours):
            for minute in sorted(self.minutes):
                for second in sorted(self.seconds):
                    candidate = datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=tz)
                    if candidate > after_local:
                        return candidate.astimezone(UTC)
        return None


@dataclass(frozen=True)
class CompiledSpec:
    cron_expressions: tuple[str, ...] = ()
    intervals: tuple[Interval, ...] = ()
    calendars: tuple[Calendar, ...] = ()
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter: timedelta = timedelta(0)
    time_zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))

    def next_nominal(self, after: datetime) -> datetime | None:
        """The first spec time strictly after ``after`` (and not before ``start_at``), or None."""
        if self.start_at is not None and after < self.start_at:
            after = self.start_at - timedelta(microseconds=1)
        candidates = [c for c in self._candidates(after) if c is not None]
        if not candidates:
            return None
        found = min(candidates)
        if self.end_at is not None and found > self.end_at:
            return None
        return found

    def _candidates(self, after: datetime) -> Iterable[datetime | None]:
        for expr in self.cron_expressions:
            try:
                yield next_cron_time(expr, after, self.time_zone.key)
            except CronError:  # an expression that never matches again
                yield None
        for interval in self.intervals:
            yield interval.next_after(after)
        for calendar in self.calendars:
            yield calendar.next_after(after, self.time_zone)

    def actual_time(self, nominal: datetime, seed: str) -> datetime:
        """``nominal`` plus a jitter in [0, jitter), never past the next nominal time."""
        if not self.jitter:
            return nominal
        bound = self.jitter
        following = self.next_nominal(nominal)
        if following is not None:
            bound = min(bound, following - nominal)
        digest = hashlib.sha256(f"{seed}|{nominal.isoformat()}".encode()).digest()
        fraction = int.from_bytes(digest[:8], "big") / 2**64
        return nominal + timedelta(seconds=bound.total_seconds() * fraction)

    def upcoming(self, after: datetime, count: int, seed: str) -> list[datetime]:
        """The next ``count`` actual times after ``after``."""
        times: list[datetime] = []
        cursor = after
        while len(times) < count:
            nominal = self.next_nominal(cursor)
            if nominal is None:
                break
            times.append(self.actual_time(nominal, seed))
            cursor = nominal
        return times


def compile_spec(data: dict[str, Any]) -> CompiledSpec:
    """Read a spec's wire shape; ``ValueError`` names the first field it cannot use."""
    tz = _time_zone(str(data.get("time_zone_name") or "UTC"))
    crons = tuple(_cron(expr) for expr in data.get("cron_expressions") or [])
    intervals = tuple(_interval(i) for i in data.get("intervals") or [])
    calendars = tuple(_calendar(c) for c in data.get("calendars") or [])
    if not (crons or intervals or calendars):
        raise ValueError("spec needs at least one of cron_expressions, intervals or calendars")
    start_at, end_at = _instant(data.get("start_at"), "start_at"), _instant(data.get("end_at"), "end_at")
    if start_at and end_at and end_at < start_at:
        raise ValueError("spec.end_at is before spec.start_at")
    jitter = _seconds(data.get("jitter") or 0, "jitter")
    return CompiledSpec(crons, intervals, calendars, start_at, end_at, jitter, tz)


def _time_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time_zone_name {name!r}") from None


def _cron(expr: Any) -> str:
    if not isinstance(expr, str):
        raise ValueError(f"invalid cron expression {expr!r}")
    try:
        parse_cron(expr)
    except CronError as error:
        raise ValueError(f"invalid cron expression {expr!r}: {error}") from None
    return expr


def _seconds(value: Any, what: str) -> timedelta:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"spec.{what} must be a non-negative number of seconds")
    return timedelta(seconds=value)


def _interval(data: Any) -> Interval:
    if not isinstance(data, dict):
        raise ValueError("each interval is an object with 'every' and optional 'offset' seconds")
    every = _seconds(data.get("every"), "intervals.every")
    offset = _seconds(data.get("offset") or 0, "intervals.offset")
    if every < timedelta(seconds=1):
        raise ValueError("spec.intervals.every must be at least 1 second")
    if offset >= every:
        raise ValueError("spec.intervals.offset must be less than every")
    return Interval(every, offset)


def _calendar(data: Any) -> Calendar:
    if not isinstance(data, dict):
        raise ValueError("each calendar is an object of field ranges")
    sets = {
        name: _range_set(data.get(name), name, low, high, default)
        for name, (low, high, default) in _CALENDAR_FIELDS.items()
    }
    years = _range_set(data.get("year"), "year", 1970, 9999, None)
    return Calendar(
        seconds=sets["second"],
        minutes=sets["minute"],
        hours=sets["hour"],
        days_of_month=sets["day_of_month"],
        months=sets["month"],
        days_of_week=sets["day_of_week"],
        years=years,
    )


def _range_set(
    ranges: Any, name: str, low: int, high: int, default: tuple[int, int] | None
) -> frozenset[int]:
    """Expand ``[{"start", "end", "step"}]`` (Temporal's ScheduleRange) into the allowed values."""
    if not ranges:
        return frozenset(range(default[0], default[1] + 1)) if default else frozenset()
    if not isinstance(ranges, Sequence):
        raise ValueError(f"calendar.{name} must be a list of ranges")
    values: set[int] = set()
    for item in ranges:
        if not isinstance(item, dict) or not isinstance(item.get("start"), int):
            raise ValueError(f"calendar.{name} ranges need an integer 'start'")
        start = int(item["start"])
        end = max(int(item.get("end") or 0), start)
        step = int(item.get("step") or 1)
        if start < low or end > high or step < 1:
            raise ValueError(f"calendar.{name} must stay within {low}..{high} with a positive step")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _instant(value: Any, what: str) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        parsed = value
    else:
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            raise ValueError(f"spec.{what} must be an ISO 8601 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
