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

from history.schedule_words import duration_in_words

TIME_FORMAT = "%Y-%m-%d %H:%M:%S %Z"
# (unit, seconds in it) from the largest down, as history.schedule_words spells them.
UNITS = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))
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


def duration_words(seconds: float | timedelta) -> str:
    """A measured duration in words: "941 ms", "5.2 seconds", "2 minutes 5 seconds", "3 days 4 hours".

    Its two largest units are enough to compare runs (``history.schedule_words`` spells
    the units, as it does for schedule specs); a sub-second duration keeps its
    milliseconds, since that is where a quick run's time goes.
    """
    total = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
    if total < 1:
        return f"{total * 1000:.0f} ms"
    if total < 10:
        return f"{total:.1f} seconds"
    largest = next(i for i, (_, size) in enumerate(UNITS) if total >= size)
    step = UNITS[min(largest + 1, len(UNITS) - 1)][1]
    return duration_in_words(round(total / step) * step)


def compact_duration(seconds: float) -> str:
    """A duration in one unit with a decimal ("941 ms", "12.5 s", "1.5 min", "30.0 d"):
    for the timeline's axis, bars and folded gaps, where width is short."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


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
