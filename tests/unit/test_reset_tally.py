"""The reset preview's tallies: thousands of like side effects read as one line each."""

from __future__ import annotations

from typing import Any

from executions.ui import executions as pages


def _completed(event_id: int, activity_type: str, activity_id: str) -> dict[str, Any]:
    return {"event_id": event_id, "activity_type": activity_type, "activity_id": activity_id}


def _by_type(a: dict[str, Any]) -> str:
    return f"Activity {a['activity_type']} completed"


def _with_id(a: dict[str, Any]) -> str:
    return f"Activity {a['activity_type']} ({a['activity_id']}) completed"


def test_like_items_share_a_line_with_their_count_and_first_and_last_event() -> None:
    items = [_completed(10 + i, "Step", f"s{i}") for i in range(3000)] + [_completed(9000, "Charge", "c1")]
    tally = pages._tally(items, _by_type, _with_id)
    assert tally["more"] == 0
    step, charge = tally["lines"]
    assert (step["label"], step["count"]) == ("Activity Step completed", 3000)
    assert (step["first_event_id"], step["last_event_id"]) == (10, 3009)
    assert charge["label"] == "Activity Charge (c1) completed" and charge["count"] == 1
    assert charge["first_event_id"] == charge["last_event_id"] == 9000


def test_lines_past_the_cap_are_counted_not_shown() -> None:
    items = [{"event_id": i, "workflow_id": f"child-{i}"} for i in range(pages.TALLY_LINES + 7)]
    tally = pages._tally(items, lambda c: f"Child {c['workflow_id']} started")
    assert len(tally["lines"]) == pages.TALLY_LINES and tally["more"] == 7
    assert tally["lines"][0]["label"] == "Child child-0 started"


def test_the_page_line_reads_as_words() -> None:
    from django.template.loader import render_to_string

    many = {"count": 4, "first_event_id": 12, "last_event_id": 40}
    one = {"count": 1, "first_event_id": 12, "last_event_id": 12}
    no_event = {"count": 1, "first_event_id": None, "last_event_id": None}
    assert render_to_string("ui/_tally_count.html", {"line": many}) == " ×4, events 12–40"
    assert render_to_string("ui/_tally_count.html", {"line": one}) == " at event 12"
    assert render_to_string("ui/_tally_count.html", {"line": no_event}) == ""
