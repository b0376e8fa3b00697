"""Signals written together: several clients' signals in one transaction and one commit.

A signal alone is a trip to the API's threads, a transaction of four round trips (begin,
the run's lock, the write, commit) and a commit's WAL flush: as much CPU as the signal's
own work several times over. Signals that reach a frontend process while another batch of
them is being written go together (``chronicle.lane_asgi.Together``), and here they cost
one resolve of their runs, one lock of all of them (in run-id order, as every statement
that locks several runs takes them, so none waits for another in a circle), each signal
applied exactly as alone, one write and one commit.

Each signal keeps its own answer. Its own refusals (its name, its input's size, the run's
signal limit) are its alone: nothing of it was written. A signal whose run the batch
cannot settle at once (not found, not running, no longer the workflow id's current run
by the time it is locked) is sent alone after the batch, which answers it exactly as
before. If the batch's transaction fails as a whole, every signal is sent alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, transaction

from chronicle.errors import ChronicleError
from history import faults
from history.kernel import store
from history.kernel._mutation import ExecutionMutation, save_all
from history.kernel.client_operations import apply_signal, check_signal, signal_workflow_execution
from history.kernel.locks import lock_runs, shard_for
from history.models import ExecutionStatus, WorkflowExecution
from namespaces.models import Namespace

Outcome = ChronicleError | None


@dataclass(frozen=True)
class SignalCall:
    """One client's signal, as :func:`~history.kernel.signal_workflow_execution` takes it."""

    namespace: Namespace
    workflow_id: str
    run_id: str | None
    signal_name: str
    input: list[Any]
    request_id: str = ""
    identity: str = ""

    def alone(self) -> Outcome:
        """Send this signal in a transaction of its own; its refusal, or None."""
        try:
            signal_workflow_execution(
                self.namespace,
                workflow_id=self.workflow_id,
                run_id=self.run_id,
                signal_name=self.signal_name,
                input=self.input,
                request_id=self.request_id,
                identity=self.identity,
            )
        except ChronicleError as refusal:
            return refusal
        return None


def signal_workflow_executions(calls: Sequence[SignalCall]) -> list[Outcome]:
    """Send the signals, those that can go together in one transaction; each one's
    refusal (or None), in the calls' order."""
    if len(calls) < 2:
        return [call.alone() for call in calls]
    outcomes: dict[int, Outcome] = {}
    ready: dict[int, uuid.UUID | None] = {}
    for i, call in enumerate(calls):
        try:
            check_signal(call.namespace, call.signal_name, call.input)
            ready[i] = uuid.UUID(call.run_id) if call.run_id else None
        except (ChronicleError, ValueError):
            outcomes[i] = calls[i].alone()  # refused alone, with its own words
    later: list[int] = []
    try:
        with faults.answered_regardless(), transaction.atomic(durable=True):
            later = _write_together(calls, ready, outcomes)
            faults.planted_rollback()
    except (ChronicleError, DatabaseError):
        outcomes = {i: outcomes[i] for i in outcomes if i not in ready}  # nothing of the batch stands
        later = list(ready)
    for i in later:
        outcomes[i] = calls[i].alone()
    return [outcomes[i] for i in range(len(calls))]


def _write_together(
    calls: Sequence[SignalCall], ready: dict[int, uuid.UUID | None], outcomes: dict[int, Outcome]
) -> list[int]:
    """Inside the batch's transaction: lock the signals' runs, apply each signal, write them
    all. Fills ``outcomes`` for the signals applied or refused here; returns the positions
    to send alone after the commit."""
    targets = _current_runs(calls, ready)
    shards = {shard_for(calls[i].namespace.pk, calls[i].workflow_id) for i in ready}
    runs = lock_runs(set(targets.values()), shards)
    mutations: dict[uuid.UUID, ExecutionMutation] = {}
    later: list[int] = []
    for i in ready:
        run_id = targets.get(i)
        run = runs.get(run_id) if run_id is not None else None
        if run is None or run.status != ExecutionStatus.RUNNING:
            # Gone, closed, or (named by workflow id) replaced by a newer run since the read:
            # alone, the signal finds the run that is current then, or says why none is.
            later.append(i)
            continue
        mutation = mutations.get(run.run_id) or ExecutionMutation(run, calls[i].namespace)
        mutations[run.run_id] = mutation
        call = calls[i]
        try:
            apply_signal(mutation, call.signal_name, call.input, call.request_id, identity=call.identity)
            outcomes[i] = None
        except ChronicleError as refusal:
            outcomes[i] = refusal
    save_all(list(mutations.values()))
    return later


def _current_runs(calls: Sequence[SignalCall], ready: dict[int, uuid.UUID | None]) -> dict[int, uuid.UUID]:
    """Each ready call's run, read in one statement without locking: the given run, else the
    workflow id's current one (running, else the latest), as a signal alone locks it."""
    order = list(ready)
    params = [
        store.array_literal(order),
        store.array_literal(str(calls[i].namespace.pk) for i in order),
        store.array_literal(calls[i].workflow_id for i in order),
        store.array_literal(shard_for(calls[i].namespace.pk, calls[i].workflow_id) for i in order),
        store.array_literal(ready[i] or "" for i in order),
        ExecutionStatus.RUNNING.value,
    ]
    with store.bound_cursor() as cursor:
        cursor.execute(_CURRENT_RUNS_SQL, params)
        rows = cursor.fetchall()
    return {int(i): run_id for i, run_id in rows}


_CURRENT_RUNS_SQL = (
    "SELECT c.i, r.run_id FROM unnest(%s::int[], %s::uuid[], %s::text[], %s::int[], %s::text[]) "
    "AS c(i, namespace_id, workflow_id, shard_id, run_id) CROSS JOIN LATERAL ("
    f"SELECT e.run_id FROM {WorkflowExecution._meta.db_table} e "
    "WHERE e.namespace_id = c.namespace_id AND e.workflow_id = c.workflow_id AND e.shard_id = c.shard_id "
    "AND (c.run_id = '' OR e.run_id = NULLIF(c.run_id, '')::uuid) "
    "ORDER BY e.status = %s DESC, e.start_time DESC LIMIT 1) r"
)
