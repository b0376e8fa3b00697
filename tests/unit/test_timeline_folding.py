"""Which lanes a long run's timeline draws: every notable span, then the latest plain ones."""

from __future__ import annotations

from datetime import UTC, datetime

from executions.ui.timeline import COMPLETED, FAILED, MAX_SPAN_LANES, Span, _worth_drawing

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
