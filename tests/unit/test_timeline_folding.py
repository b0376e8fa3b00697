"""Which lanes a long run's timeline draws: every notable span, then the latest plain ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from executions.ui.timeline import COMPLETED, FAILED, MAX_SPAN_LANES, Span, _worth_drawing
from executions.ui.timeline_scale import FOLDED_WIDTH_PERCENT, Scale, idle_folds

T0 = datetime(2026, 12, 3, tzinfo=UTC)


def span(n: int, outcome: str = COMPLETED, attempt: int = 1) -> Span:
    return Span("activity", f"a{n}", T0, [n], end=T0, outcome=outcome, attempt=attempt)


def test_a_short_run_draws_every_lane() -> None:
    spans = [span(n) for n in range(MAX_SPAN_LANES)]
    assert _worth_drawing(spans) == (spans, 0)


def test_a_long_run_keeps_failed_and_retried_spans_and_the_latest_plain_ones_in_order() -> None:
    spans = [span(n) for n in range(1_000)]
    spans[10] = span(10, outcome=FAILED)
    spans[20] = span(20, attempt=3)
    shown, folded = _worth_drawing(spans)
    assert len(shown) == MAX_SPAN_LANES and folded == 1_000 - MAX_SPAN_LANES
    assert shown[:2] == [spans[10], spans[20]]
    assert shown[2:] == spans[1_000 - (MAX_SPAN_LANES - 2) :]


def test_more_notable_spans_than_lanes_keeps_the_latest_notable() -> None:
    spans = [span(n, outcome=FAILED) for n in range(MAX_SPAN_LANES + 50)]
    shown, folded = _worth_drawing(spans)
    assert shown == spans[50:] and folded == 50


# -- idle stretches -------------------------------------------------------------------------
def events_at(*seconds: float) -> list[dict[str, object]]:
    return [{"event_id": n, "event_time": T0 + timedelta(seconds=s)} for n, s in enumerate(seconds, start=1)]


def test_a_thirty_day_wait_is_folded_and_both_bursts_of_work_share_the_track() -> None:
    thirty_days = 30 * 86400
    events = events_at(0, 1, 2, thirty_days + 2, thirty_days + 4)
    end = T0 + timedelta(seconds=thirty_days + 4)
    [fold] = idle_folds(events, end)
    assert (fold.after_event_id, fold.seconds) == (3, thirty_days)
    assert fold.words == "30.0 d with no events after event 3"

    scale = Scale(T0, end, [fold])
    # Two seconds of work each side: each gets half of what the fold leaves.
    before, after = scale.left(fold.start), scale.left(fold.end)
    assert before == pytest.approx((100 - FOLDED_WIDTH_PERCENT) / 2)
    assert after - before == pytest.approx(FOLDED_WIDTH_PERCENT)
    assert scale.left(end) == pytest.approx(100)
    assert scale.left(T0 + timedelta(seconds=1)) == pytest.approx(before / 2)
    # The axis reads real time back: the fold's far edge is thirty days in.
    assert scale.seconds_at(after) == pytest.approx(thirty_days + 2)


def test_evenly_spread_events_and_short_gaps_are_not_folded() -> None:
    events = events_at(*range(0, 100, 10))
    assert idle_folds(events, T0 + timedelta(seconds=100)) == []
    # Past a fifth of the run but under a minute: still drawn to scale.
    assert idle_folds(events_at(0, 1, 40), T0 + timedelta(seconds=41)) == []


def test_without_folds_the_scale_is_linear() -> None:
    scale = Scale(T0, T0 + timedelta(seconds=200))
    assert scale.left(T0 + timedelta(seconds=50)) == pytest.approx(25)
    assert scale.seconds_at(75) == pytest.approx(150)
