"""The timeline's one read of a run's history: each event's id, type, time and the few
attributes that link events into spans (as text, read with ``KT``), never the payloads.

Times come through ``HistoryEvent.epoch_time()`` (a float turned into a datetime here):
Django's ``timestamptz`` loader cost a third of a long timeline's CPU.
"""

from __future__ import annotations

from typing import Any

from django.db.models.fields.json import KT

from history.models import HistoryEvent, WorkflowExecution, time_from_epoch

# (column name, attribute path) read for every event besides id, type and time.
LINK_ATTRIBUTES = (
    ("scheduled", "attributes__scheduled_event_id"),
    ("started", "attributes__started_event_id"),
    ("initiated", "attributes__initiated_event_id"),
    ("activity_id", "attributes__activity_id"),
    ("activity_type", "attributes__activity_type__name"),
    ("max_attempts", "attributes__retry_policy__maximum_attempts"),
    ("attempt", "attributes__attempt"),
    ("last_failure", "attributes__last_failure__message"),
    ("failure", "attributes__failure__message"),
    ("timeout_type", "attributes__timeout_type"),
    ("cause", "attributes__cause"),
    ("timer_id", "attributes__timer_id"),
    ("signal_name", "attributes__signal_name"),
    ("marker_name", "attributes__marker_name"),
    ("child_id", "attributes__workflow_id"),
    ("child_run", "attributes__workflow_execution__run_id"),
    ("workflow_type", "attributes__workflow_type__name"),
)
COLUMNS = ("event_id", "event_type", "event_time", *(name for name, _ in LINK_ATTRIBUTES))


def read_events(ex: WorkflowExecution) -> list[dict[str, Any]]:
    """The one query: each event's id, type, time and link attributes (as text)."""
    annotations = {name: KT(path) for name, path in LINK_ATTRIBUTES}
    rows = (
        HistoryEvent.objects.filter(run=ex)
        .annotate(epoch=HistoryEvent.epoch_time(), **annotations)
        .order_by("event_id")
        .values_list(*(column if column != "event_time" else "epoch" for column in COLUMNS))
    )
    events = [dict(zip(COLUMNS, row, strict=True)) for row in rows]
    for event in events:
        event["event_time"] = time_from_epoch(event["event_time"])
    return events
