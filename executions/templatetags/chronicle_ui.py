"""Template filters for the operator UI: moments and durations written one way (``ui.words``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from executions.ui import words

register = template.Library()


@register.filter
def when(value: datetime | str | None) -> SafeString | str:
    """A ``<time>`` in the one format with its zone, followed by how long ago it was."""
    moment = words.as_datetime(value)
    if moment is None:
        return "—"
    return format_html(
        '<time datetime="{}">{}</time> <span class="ago">({})</span>',
        moment.isoformat(),
        words.moment(moment),
        words.relative(moment),
    )


@register.filter
def stamp(value: datetime | str | None) -> SafeString | str:
    """A ``<time>`` in the one format with its zone, without the relative part (dense tables)."""
    moment = words.as_datetime(value)
    if moment is None:
        return "—"
    return format_html('<time datetime="{}">{}</time>', moment.isoformat(), words.moment(moment))


@register.filter
def duration(value: float | timedelta | None) -> str:
    """A duration in words ("2 minutes 5 seconds")."""
    return "—" if value is None else words.duration_words(value)
