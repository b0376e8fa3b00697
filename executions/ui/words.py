"""Times and durations in words, one way for every page.

An operator compares times across pages and across colleagues in other zones, so every
moment is written in one format with its zone (``2026-12-06 09:41:07 UTC``) beside how long
ago it was ("3 min ago"); durations read as words ("2 minutes 5 seconds"), never as a
``timedelta``'s ``0:02:05.941179``. The template filters in ``executions.templatetags``
and the views both call these.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

TIME_FORMAT = "%Y-%m-%d %H:%M:%S %Z"
# (seconds in the unit, singular, plural) from the largest down.
UNITS = (
    (86_400, "day", "days"),
    (3_600, "hour", "hours"),
    (60, "minute", "minutes"),
    (1, "second", "seconds"),
)
SHORT_UNITS = ((86_400, "d"), (3_600, "h"), (60, "min"), (1, "s"))


def as_datetime(value: datetime | str | None) -> datetime | None:
    """A datetime from a model field or the ISO text the selectors return."""
    if value is None or value == "":
        return None
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return (
        moment if timezone.is_aware(moment) else timezone.make_aware(moment, timezone.get_default_timezone())
    )


def moment(value: datetime) -> str:
    """A moment in the one format pages use, in UTC."""
    return value.astimezone(timezone.get_default_timezone()).strftime(TIME_FORMAT)


def _count(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


def duration_words(seconds: float | timedelta) -> str:
    """A duration in words: "941 ms", "12.3 seconds", "2 minutes 5 seconds", "3 days 4 hours".

    The two largest units are enough to compare runs; a sub-second duration keeps its
    milliseconds, since that is where a quick run's time goes.
    """
    total = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
    if total < 1:
        return f"{total * 1000:.0f} ms"
    if total < 60:
        return f"{total:.1f} seconds" if total < 10 else _count(round(total), "second", "seconds")
    remaining = round(total)
    counts = []
    for size, singular, plural in UNITS:
        n, remaining = divmod(remaining, size)
        counts.append((n, singular, plural))
    largest = next(i for i, (n, _, _) in enumerate(counts) if n)
    return " ".join(_count(*unit) for unit in counts[largest : largest + 2] if unit[0])


def short_duration(seconds: float) -> str:
    """A duration in one short unit ("3 min", "2 h"): for ages and tight table cells."""
    whole = round(abs(seconds))
    for size, unit in SHORT_UNITS:
        if whole >= size:
            return f"{whole // size} {unit}"
    return "0 s"


def relative(value: datetime, now: datetime | None = None) -> str:
    """How far ``value`` is from now: "3 min ago", "in 5 min", "just now"."""
    seconds = ((now or timezone.now()) - value).total_seconds()
    if abs(seconds) < 2:
        return "just now"
    return f"{short_duration(seconds)} ago" if seconds > 0 else f"in {short_duration(seconds)}"
