"""Locking a run leaves its namespace row unlocked, so runs of one namespace do not queue."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from history.kernel import ExecutionMutation, ShardFence, fire_timers
from history.kernel.locks import lock_run
from history.models import HistoryEvent, Shard, TimerKind, TimerTask, WorkflowExecution
from tests.factories import ExecutionFactory


@pytest.fixture
def namespace_row_held(
    transactional_db: None, other_connection: psycopg.Connection[Any]
) -> Iterator[WorkflowExecution]:
    """A run whose namespace row another connection holds ``FOR UPDATE`` throughout."""
    execution = ExecutionFactory()
    other_connection.execute(
        "SELECT 1 FROM namespaces_namespace WHERE id = %s FOR UPDATE", [execution.namespace_id]
    )
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '2s'")  # blocking on the namespace fails fast
    try:
        yield execution
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
        other_connection.rollback()


def test_lock_run_does_not_wait_for_the_namespace_row(namespace_row_held: WorkflowExecution) -> None:
    with transaction.atomic():
        locked = lock_run(namespace_row_held.run_id)
    assert locked.namespace.id == namespace_row_held.namespace_id


def test_firing_timers_does_not_wait_for_the_namespace_row(namespace_row_held: WorkflowExecution) -> None:
    execution = namespace_row_held
    Shard.objects.update_or_create(shard_id=execution.shard_id, defaults={"range_id": 1})
    with transaction.atomic():
        mutation = ExecutionMutation(lock_run(execution.run_id), execution.namespace)
        mutation.add_timer(
            TimerKind.USER_TIMER, timezone.now() - timedelta(seconds=1), timer_id="t", scheduled_event_id=1
        )
        mutation.save()
    timer = TimerTask.objects.get(run=execution, kind=TimerKind.USER_TIMER)
    assert fire_timers(ShardFence(execution.shard_id, 1), [(timer.id, str(execution.run_id))]) == 1
    assert HistoryEvent.objects.filter(run=execution, event_type="TimerFired").count() == 1
