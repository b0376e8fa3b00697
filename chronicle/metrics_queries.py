"""The metric families computed at scrape time, each from one bounded query.

What these report is what the database holds, the same whichever frontend answers the
scrape, so they are computed there and then instead of being counted on the hot path:

* ``chronicle_task_queue_backlog{namespace,task_queue,kind}`` and
  ``chronicle_task_queue_oldest_task_age_seconds{...}``: tasks waiting for a poller (the
  200 largest queues).
* ``chronicle_timers_due`` and ``chronicle_timer_oldest_due_seconds``: timers past their
  fire time not yet fired (counted up to 10,000 a shard, each shard by its index).
* ``chronicle_shards_owned{owner}``, ``chronicle_shards_unowned``: live leases.
* ``chronicle_shard_owner_heartbeat_age_seconds{owner}``: each registered shard owner.
* ``chronicle_workflow_task_dispatch_latency_seconds{quantile}`` (scheduled to started) and
  ``chronicle_workflow_task_turnaround_seconds{quantile}`` (started to completed: the
  worker's time), ``chronicle_history_length_events{quantile}`` and
  ``chronicle_history_size_bytes{quantile}``: over the events appended in the last
  minute (at most the latest 20,000), read by primary key. Quantiles 0.5, 0.99 and 1 (the
  largest), plus a ``_samples`` gauge saying how many they were computed from.
* ``chronicle_metrics_database_up``: 0 when these queries could not run.

Table names come from the SQL itself: this module imports no app (apps import
:mod:`chronicle.metrics`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from django.db import DatabaseError, connection, transaction
from prometheus_client.core import GaugeMetricFamily, Metric

log = logging.getLogger(__name__)
STATEMENT_TIMEOUT_MS = 2000
WINDOW_SECONDS = 60
WINDOW_EVENTS = 20000
QUANTILES = ("0.5", "0.99", "1")

BACKLOG_SQL = """
SELECT n.name, t.task_queue, t.kind, count(*), extract(epoch FROM now() - min(t.visible_at))::float8
FROM history_task t JOIN namespaces_namespace n ON n.id = t.namespace_id
WHERE t.visible_at <= now()
GROUP BY n.name, t.task_queue, t.kind
ORDER BY count(*) DESC LIMIT 200
"""
TIMERS_SQL = """
SELECT coalesce(sum(due.n), 0)::bigint,
       coalesce(max(extract(epoch FROM now() - due.oldest)), 0)::float8
FROM history_shard s,
LATERAL (SELECT (SELECT count(*) FROM (SELECT 1 FROM history_timertask
                  WHERE shard_id = s.shard_id AND fire_at <= now() LIMIT 10000) x) AS n,
                (SELECT min(fire_at) FROM history_timertask
                  WHERE shard_id = s.shard_id AND fire_at <= now()) AS oldest) due
"""
SHARDS_SQL = """
SELECT owner, count(*) FROM history_shard
WHERE owner <> '' AND lease_expires_at > now() GROUP BY owner
UNION ALL
SELECT '', count(*) FROM history_shard
WHERE owner = '' OR lease_expires_at IS NULL OR lease_expires_at <= now()
"""
HEARTBEATS_SQL = """
SELECT owner, extract(epoch FROM now() - heartbeat_at)::float8 FROM history_shardownerprocess
"""
# The recent events, newest first by primary key, then those that measure something.
RECENT_SQL = f"""
WITH recent AS (
    SELECT run_id, event_type, event_time, attributes FROM history_historyevent
    WHERE id > (SELECT coalesce(max(id), 0) FROM history_historyevent) - {WINDOW_EVENTS}
      AND event_time > now() - interval '{WINDOW_SECONDS} seconds'
), measured AS (
    SELECT CASE r.event_type WHEN 'WorkflowTaskStarted' THEN 'dispatch' ELSE 'turnaround' END AS what,
           extract(epoch FROM r.event_time - e.event_time)::float8 AS seconds
    FROM recent r JOIN history_historyevent e ON e.run_id = r.run_id AND e.event_id = (
        r.attributes ->> CASE r.event_type WHEN 'WorkflowTaskStarted' THEN 'scheduled_event_id'
                                           ELSE 'started_event_id' END)::bigint
    WHERE r.event_type IN ('WorkflowTaskStarted', 'WorkflowTaskCompleted')
    UNION ALL
    SELECT 'events', (x.next_event_id - 1)::float8 FROM history_workflowexecution x
    WHERE x.run_id IN (SELECT DISTINCT run_id FROM recent)
    UNION ALL
    SELECT 'bytes', x.history_size_bytes::float8 FROM history_workflowexecution x
    WHERE x.run_id IN (SELECT DISTINCT run_id FROM recent)
)
SELECT what, count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY seconds),
       max(seconds)
FROM measured GROUP BY what
"""
RECENT_FAMILIES = {
    "dispatch": (
        "chronicle_workflow_task_dispatch_latency_seconds",
        "Workflow tasks started in the last minute: from scheduled to started.",
    ),
    "turnaround": (
        "chronicle_workflow_task_turnaround_seconds",
        "Workflow tasks completed in the last minute: from started to completed (the worker's time).",
    ),
    "events": ("chronicle_history_length_events", "Runs active in the last minute: events in their history."),
    "bytes": ("chronicle_history_size_bytes", "Runs active in the last minute: bytes of their history."),
}


def database_families() -> Iterator[Metric]:
    """Every family above; ``chronicle_metrics_database_up`` 0 and none of them if the
    database could not answer."""
    up = GaugeMetricFamily("chronicle_metrics_database_up", "1 when the scrape-time queries ran.")
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            rows = {name: _rows(cursor, sql) for name, sql in _QUERIES.items()}
    except DatabaseError as error:
        log.warning("metrics: the scrape-time queries failed (%s)", str(error).strip().splitlines()[0])
        up.add_metric([], 0)
        yield up
        return
    up.add_metric([], 1)
    yield up
    yield from _backlog(rows["backlog"])
    yield from _timers(rows["timers"])
    yield from _shards(rows["shards"], rows["heartbeats"])
    yield from _recent(rows["recent"])


_QUERIES = {
    "backlog": BACKLOG_SQL,
    "timers": TIMERS_SQL,
    "shards": SHARDS_SQL,
    "heartbeats": HEARTBEATS_SQL,
    "recent": RECENT_SQL,
}


def _rows(cursor: Any, sql: str) -> list[tuple[Any, ...]]:
    cursor.execute(sql)
    return list(cursor.fetchall())


def _backlog(rows: list[tuple[Any, ...]]) -> Iterator[Metric]:
    labels = ["namespace", "task_queue", "kind"]
    size = GaugeMetricFamily("chronicle_task_queue_backlog", "Tasks waiting for a poller.", labels=labels)
    age = GaugeMetricFamily(
        "chronicle_task_queue_oldest_task_age_seconds", "Age of the oldest task waiting.", labels=labels
    )
    for namespace, queue, kind, count, oldest in rows:
        size.add_metric([namespace, queue, kind], count)
        age.add_metric([namespace, queue, kind], max(0.0, oldest))
    yield size
    yield age


def _timers(rows: list[tuple[Any, ...]]) -> Iterator[Metric]:
    due, oldest = rows[0] if rows else (0, 0.0)
    yield GaugeMetricFamily("chronicle_timers_due", "Timers past their fire time, not yet fired.", value=due)
    yield GaugeMetricFamily(
        "chronicle_timer_oldest_due_seconds", "How late the oldest unfired due timer is.", value=oldest
    )


def _shards(owned: list[tuple[Any, ...]], heartbeats: list[tuple[Any, ...]]) -> Iterator[Metric]:
    per_owner = GaugeMetricFamily(
        "chronicle_shards_owned", "Shards held under a live lease.", labels=["owner"]
    )
    unowned = 0
    for owner, count in owned:
        if owner:
            per_owner.add_metric([owner], count)
        else:
            unowned += count
    yield per_owner
    yield GaugeMetricFamily("chronicle_shards_unowned", "Shards with no live lease.", value=unowned)
    age = GaugeMetricFamily(
        "chronicle_shard_owner_heartbeat_age_seconds",
        "Since each shard owner's last heartbeat.",
        labels=["owner"],
    )
    for owner, seconds in heartbeats:
        age.add_metric([owner], max(0.0, seconds))
    yield age


def _recent(rows: list[tuple[Any, ...]]) -> Iterator[Metric]:
    found = {what: rest for what, *rest in rows}
    for what, (name, text) in RECENT_FAMILIES.items():
        family = GaugeMetricFamily(name, text, labels=["quantile"])
        samples = GaugeMetricFamily(f"{name}_samples", f"{text} How many.")
        count, *values = found.get(what, (0, None, None, None))
        for quantile, value in zip(QUANTILES, values, strict=True):
            if value is not None:
                family.add_metric([quantile], float(value))
        samples.add_metric([], count)
        yield family
        yield samples
