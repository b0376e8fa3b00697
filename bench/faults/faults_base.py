"""What every fault of the nemesis shares: its figures, its log, and the recovery probes.

The faults themselves live in three mixins of :class:`~bench.faults.nemesis.Nemesis`, by
what they act on: processes (:mod:`.faults_process`), the database (:mod:`.faults_db`) and
the data the load sends (:mod:`.faults_data`). Each fault is a coroutine that injects,
waits for its recovery within a bound and returns whether it came.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from sdk.client import Client

from .load import Load
from .stack import LEASE_SECONDS, NAMESPACE, OWNERS, Cluster, Stack

# A live owner renews every lease a third of the way through: renewed after ``since``, a
# lease runs past ``since`` plus a whole lease.
STALE_SHARDS = (
    "SELECT count(*) FROM history_shard WHERE owner = '' OR lease_expires_at IS NULL"
    f" OR lease_expires_at < %s + interval '{LEASE_SECONDS} s'"
)


@dataclass
class FaultStats:
    injected: int = 0
    survived: int = 0
    notes: list[str] = field(default_factory=list)
    worst: dict[str, float] = field(default_factory=dict)  # a figure per probe: its worst value

    def figure(self, name: str, value: float) -> None:
        """Keep the worst (highest) ``value`` of the probe figure ``name``."""
        self.worst[name] = round(max(value, self.worst.get(name, value)), 2)


def sql(db_url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One short autocommit statement on a connection of its own (the stack's may be cut)."""
    with psycopg.connect(
        db_url, autocommit=True, connect_timeout=5, application_name="faults-nemesis"
    ) as conn:
        cur = conn.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


class NemesisBase:
    """The handles a fault needs: the stack, a client, the load (to start and signal runs
    the ledger records, so the checker judges them too), the cluster, a seeded rng."""

    def __init__(
        self,
        stack: Stack,
        client: Client,
        cluster: Cluster | None,
        rng: random.Random,
        load: Load | None = None,
    ) -> None:
        self.stack = stack
        self.client = client
        self.cluster = cluster
        self.rng = rng
        self._load = load
        self.stats: dict[str, FaultStats] = {}
        self.log = (stack.run_dir / "nemesis.jsonl").open("a", encoding="utf-8")
        self.serial = 0  # numbers the runs the nemesis starts itself

    @property
    def load(self) -> Load:
        assert self._load is not None, "this fault starts runs: the nemesis needs the load"
        return self._load

    def note(self, fault: str, phase: str, **fields: Any) -> None:
        self.log.write(json.dumps({"t": time.time(), "fault": fault, "phase": phase, **fields}) + "\n")
        self.log.flush()

    def wid(self, kind: str) -> str:
        """A workflow id of the nemesis's own, under the load's prefix (the ledger's runs)."""
        self.serial += 1
        return f"{self.load.prefix}-{kind}-{self.serial}"

    async def db(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(sql, self.stack.db_url, query, params)

    # -- recovery probes ----------------------------------------------------------
    async def api_answers(self, within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(self.client.count_workflows(), timeout=5)
                return True
            except Exception:
                await asyncio.sleep(0.5)
        return False

    async def shards_owned(self, since: datetime, within: float) -> bool:
        """Every shard's lease renewed or taken after ``since`` (database time): a live owner
        holds each one again. (A dead owner's lease stays valid until it expires, so "no
        lease expired" alone would pass at once.)"""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                rows = await self.db(STALE_SHARDS, (since,))
                if rows and rows[0][0] == 0:
                    return True
            await asyncio.sleep(0.5)
        return False

    def db_now(self) -> datetime:
        when: datetime = sql(self.stack.db_url, "SELECT now()")[0][0]
        return when

    def owners_by_shards(self) -> list[tuple[str, int]]:
        rows = sql(
            self.stack.db_url, "SELECT owner, count(*) FROM history_shard GROUP BY owner ORDER BY 2 DESC"
        )
        return [(str(r[0]), int(r[1])) for r in rows if r[0] in OWNERS]

    async def closed(self, wids: list[str], within: float) -> dict[str, str]:
        """Wait until every run of ``wids`` is closed; each one's last status (RUNNING when
        the bound passed, ``?`` when it could not be read)."""
        deadline = time.monotonic() + within
        status = dict.fromkeys(wids, "?")
        while time.monotonic() < deadline:
            for wid in wids:
                if status[wid] not in ("?", "RUNNING"):
                    continue
                with contextlib.suppress(Exception):
                    described = await self.client.get_workflow_handle(wid).describe()
                    status[wid] = described.status.name
            if all(s not in ("?", "RUNNING") for s in status.values()):
                break
            await asyncio.sleep(0.3)
        return status

    async def events(self, wid: str) -> list[dict[str, Any]]:
        """The wire form of the latest run of ``wid``'s history."""
        history = await self.client.get_workflow_handle(wid).fetch_history()
        return [event.to_wire() for event in history.events]

    def namespace_limit(self) -> int:
        rows = sql(
            self.stack.db_url,
            "SELECT payload_limit_bytes FROM namespaces_namespace WHERE name = %s",
            (NAMESPACE,),
        )
        return int(rows[0][0])
