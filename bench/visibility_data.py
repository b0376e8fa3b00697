"""Bulk-loaded runs for visibility volume: planner tests and the latency benchmark.

One ``INSERT ... SELECT FROM generate_series`` per call. These rows are test data, not
kernel writes: they have no history and exist to give the planner and the benchmark a
realistic table, never to exercise behaviour (``tests.factories.ExecutionFactory`` does).
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from history.models import WorkflowExecution
from namespaces.models import Namespace

VOLUME_TYPES = ("Order", "Refund", "Shipment", "Invoice")
VOLUME_STATUSES = ("Running", "Completed", "Completed", "Completed", "Failed", "Completed", "Canceled")
_VOLUME_SQL = {
    "run_id": "gen_random_uuid()",
    "first_run_id": "gen_random_uuid()",
    "workflow_id": "'vol-' || i",
    "workflow_type": f"(ARRAY[{', '.join(repr(t) for t in VOLUME_TYPES)}])[1 + i %% 4]",
    "task_queue": "'volume'",
    "shard_id": "i %% 16",
    "status": f"(ARRAY[{', '.join(repr(s) for s in VOLUME_STATUSES)}])[1 + i %% 7]",
    "next_event_id": "3 + i %% 40",
    "start_time": "now() - i * interval '1 second'",
    "execution_time": "now() - i * interval '1 second'",
    "close_time": "CASE WHEN i %% 7 = 0 THEN NULL ELSE now() - (i - 90) * interval '1 second' END",
    "search_attributes": (
        "jsonb_build_object('CustomerId', 'c-' || (i %% 1000), 'Amount', (i * 31) %% 10000, 'Due',"
        " to_char(timestamp '2026-01-01' + ((i * 7919) %% 100000) * interval '1 minute',"
        ' \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\'))'
    ),
}


def bulk_insert_runs(namespace: Namespace, count: int) -> None:
    """Insert ``count`` runs with one SQL statement (about 1 s per 50,000).

    A run of index ``i`` has workflow id ``vol-i``, type ``VOLUME_TYPES[i % 4]``, status
    ``VOLUME_STATUSES[i % 7]`` (``Running`` when ``i % 7 == 0``), started ``i`` seconds ago,
    and search attributes ``CustomerId = c-<i % 1000>``, ``Amount = (31 i) % 10000`` and ``Due``
    ``(7919 i) % 100000`` minutes after 2026-01-01 (register them first). Ends with ANALYZE.
    """
    columns: list[str] = []
    selects: list[str] = []
    params: list[Any] = []
    for model_field in WorkflowExecution._meta.concrete_fields:
        columns.append(f'"{model_field.column}"')
        if model_field.column == "namespace_id":
            selects.append("%s")
            params.append(namespace.pk)
        elif model_field.column in _VOLUME_SQL:
            selects.append(_VOLUME_SQL[model_field.column])
        else:
            selects.append("%s")
            params.append(model_field.get_db_prep_save(model_field.get_default(), connection))
    table = WorkflowExecution._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) "
            f"SELECT {', '.join(selects)} FROM generate_series(1, %s) AS g(i)",
            [*params, count],
        )
        # Merge the GIN index's pending entries now, as autovacuum would later: the planner
        # costs a long pending list high and would avoid the index.
        cursor.execute("SELECT gin_clean_pending_list('exec_search_attrs'::regclass)")
        cursor.execute(f"ANALYZE {table}")
