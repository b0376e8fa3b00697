"""The timeline's time axis: where a moment falls on the track, with idle stretches folded.

A run that works for seconds, waits 30 days and works again would otherwise be drawn as
two slivers at the edges; the scale is piecewise, giving each idle fold a fixed narrow
width and sharing the rest of the track among the busy time. ``executions.ui.timeline``
draws its bars, points, ticks and folds through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any

from executions.ui.words import compact_duration

# A bar never gets narrower than this share of the track, so an instant stays visible.
MIN_WIDTH_PERCENT = 0.4
# An idle stretch (no events) longer than this share of the run, and than FOLD_MIN_SECONDS,
# is folded to FOLDED_WIDTH_PERCENT of the track: a run that works for seconds, waits 30
# days and works again shows both bursts of work, not two slivers at the edges.
FOLD_SHARE = 0.2
FOLD_MIN_SECONDS = 60.0
FOLDED_WIDTH_PERCENT = 3.0


@dataclass(frozen=True)
class IdleFold:
    """A stretch with no events, drawn narrow; ``after_event_id`` is the event before it."""

    start: datetime
    end: datetime
    after_event_id: int

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    @property
    def words(self) -> str:
        return f"{compact_duration(self.seconds)} with no events after event {self.after_event_id}"


def idle_folds(events: list[dict[str, Any]], end: datetime) -> list[IdleFold]:
    """The idle stretches worth folding: gaps between events (or from the last event to
    ``end``) longer than ``FOLD_SHARE`` of the run and than ``FOLD_MIN_SECONDS``."""
    if not events:
        return []
    start = events[0]["event_time"]
    total = (end - start).total_seconds()
    threshold = max(FOLD_MIN_SECONDS, FOLD_SHARE * total)
    folds = []
    moments = [(e["event_time"], e["event_id"]) for e in events] + [(end, 0)]
    for (before, event_id), (after, _) in pairwise(moments):
        if (after - before).total_seconds() > threshold:
            folds.append(IdleFold(before, after, event_id))
    return folds


class Scale:
    """Maps times onto the track as percentages, piecewise: idle folds get a fixed narrow
    width and the rest of the track is shared by the busy time in proportion."""

    def __init__(self, start: datetime, end: datetime, folds: list[IdleFold] | None = None) -> None:
        self.start, self.end = start, end
        self.total = max((end - start).total_seconds(), 0.001)
        folds = folds or []
        busy = max(self.total - sum(f.seconds for f in folds), 0.001)
        busy_width = 100.0 - FOLDED_WIDTH_PERCENT * len(folds)
        # (offset in seconds, seconds, x at its start, width), in time order.
        self.segments: list[tuple[float, float, float, float]] = []
        offset, x = 0.0, 0.0
        for fold in folds:
            worked = max(0.0, (fold.start - start).total_seconds() - offset)
            self.segments.append((offset, worked, x, worked / busy * busy_width))
            offset, x = offset + worked, x + worked / busy * busy_width
            self.segments.append((offset, fold.seconds, x, FOLDED_WIDTH_PERCENT))
            offset, x = offset + fold.seconds, x + FOLDED_WIDTH_PERCENT
        rest = max(0.0, self.total - offset)
        self.segments.append((offset, rest, x, rest / busy * busy_width))

    def left(self, moment: datetime) -> float:
        at = (moment - self.start).total_seconds()
        for offset, seconds, x, width in self.segments:
            if at <= offset + seconds:
                share = (at - offset) / seconds if seconds > 0 else 0.0
                return min(100.0, max(0.0, x + max(0.0, share) * width))
        return 100.0

    def seconds_at(self, position: float) -> float:
        """The time (seconds from the start) drawn at ``position`` percent of the track."""
        for offset, seconds, x, width in self.segments:
            if position <= x + width:
                return offset + (seconds * (position - x) / width if width > 0 else 0.0)
        return self.total

    def place(self, start: datetime, end: datetime) -> tuple[str, str]:
        left = self.left(start)
        width = max(MIN_WIDTH_PERCENT, self.left(end) - left)
        return f"{min(left, 100 - MIN_WIDTH_PERCENT):.3f}", f"{width:.3f}"


def ticks(scale: Scale) -> list[dict[str, str]]:
    return [
        {"left": f"{at:.0f}", "text": "0" if at == 0 else "+" + compact_duration(scale.seconds_at(at))}
        for at in (0.0, 25.0, 50.0, 75.0, 100.0)
    ]


def placed_folds(folds: list[IdleFold], scale: Scale) -> list[dict[str, str]]:
    placed = []
    for fold in folds:
        left = scale.left(fold.start)
        text = f"{compact_duration(fold.seconds)} idle"
        placed.append(
            {"left": f"{left:.3f}", "width": f"{FOLDED_WIDTH_PERCENT:.3f}", "text": text, "words": fold.words}
        )
    return placed
