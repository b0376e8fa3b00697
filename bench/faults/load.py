"""The load generator and its ledger: what the harness attempted and what it was told.

Every operation is recorded as ``ok`` (a 2xx: the server promised it is durable),
``failed`` (a 4xx that guarantees no effect) or ``unknown`` (a timeout, a reset
connection, a 5xx after the client's own retries: it may or may not have applied), in
Jepsen's sense. Each start carries a request id and each signal a unique token in its
payload, so the checker can find each one in the histories. The ledger is also written
to a JSONL file in the run directory, one flushed line per outcome, with the moment it
was recorded and the phase of the run it was invoked in (the fault then under way, for a
report per fault).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from sdk.client import Client
from sdk.exceptions import RPCError

from .stack import TASK_QUEUE
from .workflows import FINISH_SIGNAL, TOKEN_SIGNAL

# How the workflows run: short timers and short activities, so a run takes seconds.
TIMER_SECONDS = 0.5
WORK_SECONDS = 1.0
# How long the drain keeps asking for a run whose start was never acknowledged and that
# does not exist: a start that timed out may still be applied, late, but not this late.
NOT_FOUND_GRACE = 15.0
# The workflows that wait for a ``finish`` signal: the drain re-sends it to one still open.
WAIT_FOR_FINISH = ("FaultsMixed", "FaultsEcho")


@dataclass
class Op:
    kind: str  # "start" or "signal"
    workflow_id: str
    key: str  # the start's request id, or the signal's token
    outcome: str = "invoked"  # then "ok", "failed" or "unknown"
    run_id: str = ""
    detail: str = ""
    phase: str = ""  # what the run was doing when the operation was invoked (a fault's name)
    at: float = 0.0  # when its outcome was recorded (epoch seconds)
    sent: float = 0.0  # when it was invoked (epoch seconds): orders acknowledged signals


class Ledger:
    def __init__(self, path: Path) -> None:
        self.ops: list[Op] = []
        self.path = path
        self.started_types: dict[str, str] = {}  # workflow id -> type, for every start attempted

    def record(self, op: Op) -> None:
        op.at = op.at or time.time()
        self.ops.append(op)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(op)) + "\n")

    def of(self, kind: str, outcome: str | None = None) -> list[Op]:
        return [o for o in self.ops if o.kind == kind and (outcome is None or o.outcome == outcome)]


def classify(exc: BaseException) -> str:
    """``failed`` only for a refusal that guarantees nothing applied; all else is ``unknown``."""
    if isinstance(exc, RPCError) and 400 <= exc.status < 500:
        return "failed"
    return "unknown"


class Load:
    """Workflow scripts started at a steady rate until told to stop."""

    def __init__(self, client: Client, ledger: Ledger, rng: random.Random, prefix: str) -> None:
        self.client = client
        self.ledger = ledger
        self.rng = rng
        self.prefix = prefix
        self.counter = 0
        self.scripts: set[asyncio.Task[None]] = set()
        self.phase = ""  # given to each operation as it is invoked (a nemesis sets it)

    async def start(self, workflow: str, wid: str, args: list[Any], task_queue: str = TASK_QUEUE) -> Op:
        op = Op("start", wid, f"req-{wid}", phase=self.phase, sent=time.time())
        self.ledger.started_types[wid] = workflow
        try:
            handle = await self.client.start_workflow(
                workflow, args=args, id=wid, task_queue=task_queue, request_id=op.key
            )
            op.outcome, op.run_id = "ok", handle.run_id or ""
        except (RPCError, httpx.HTTPError, OSError) as exc:
            op.outcome, op.detail = classify(exc), repr(exc)[:200]
        self.ledger.record(op)
        return op

    async def signal(self, wid: str, name: str, extra: tuple[Any, ...] = ()) -> Op:
        """Send ``name`` to ``wid`` with a fresh token as its first argument (then ``extra``)."""
        self.counter += 1
        token = f"tok-{self.prefix}-{self.counter}-{self.rng.getrandbits(32):08x}"
        op = Op("signal", wid, token, phase=self.phase, sent=time.time())
        try:
            await self.client.get_workflow_handle(wid).signal(name, args=[op.key, *extra])
            op.outcome = "ok"
        except (RPCError, httpx.HTTPError, OSError) as exc:
            op.outcome, op.detail = classify(exc), repr(exc)[:200]
        self.ledger.record(op)
        return op

    async def script(self, n: int) -> None:
        """One workflow's life from the client's side: start it, signal it, tell it to finish."""
        kind = self.rng.choice(("FaultsMixed", "FaultsMixed", "FaultsParent", "FaultsChain"))
        wid = f"{self.prefix}-{n}"
        if kind == "FaultsMixed":
            args: list[Any] = [self.rng.randint(1, 3), TIMER_SECONDS, WORK_SECONDS]
        elif kind == "FaultsParent":
            args = [TIMER_SECONDS, WORK_SECONDS]
        else:
            args = [self.rng.randint(2, 4), TIMER_SECONDS]
        started = await self.start(kind, wid, args)
        if started.outcome == "failed" or kind == "FaultsParent":
            return
        for _ in range(self.rng.randint(1, 4)):
            await asyncio.sleep(self.rng.uniform(0.1, 0.8))
            await self.signal(wid, TOKEN_SIGNAL)
        if kind == "FaultsMixed":
            await self.signal(wid, FINISH_SIGNAL)

    async def run(self, stop: asyncio.Event, rate: float, concurrency: int) -> None:
        """Start scripts at ``rate`` per second, at most ``concurrency`` at once, until ``stop``."""
        n = 0
        while not stop.is_set():
            if len(self.scripts) < concurrency:
                n += 1
                task = asyncio.create_task(self.script(n))
                self.scripts.add(task)
                task.add_done_callback(self.scripts.discard)
            await asyncio.sleep(self.rng.expovariate(rate))
        if self.scripts:
            await asyncio.gather(*self.scripts, return_exceptions=True)

    async def drain(self, deadline: float) -> list[str]:
        """Wait until every workflow the load started is closed, re-sending ``finish`` to any
        Mixed run still waiting for one (its finish may have been lost or never acknowledged).
        A run that still does not exist :data:`NOT_FOUND_GRACE` seconds in, whose start was
        never acknowledged (a child: whose parent is such a run), was never started: it is
        not waited for. Returns the ids still open at ``deadline`` (loop time)."""
        loop = asyncio.get_running_loop()
        wids = sorted({o.workflow_id for o in self.ledger.of("start") if o.outcome != "failed"})
        wids += [f"{w}-child" for w in wids if self.ledger.started_types.get(w) == "FaultsParent"]
        acknowledged = {o.workflow_id for o in self.ledger.of("start", "ok")}
        open_ids = list(wids)
        nudged: dict[str, float] = {}
        never: set[str] = set()  # not started, and never will be
        began = loop.time()
        while open_ids and loop.time() < deadline:
            still: list[str] = []
            for wid in open_ids:  # parents before their children
                try:
                    status = (await self.client.get_workflow_handle(wid).describe()).status
                except (RPCError, httpx.HTTPError, OSError) as exc:
                    parent = wid.removesuffix("-child")
                    missing = isinstance(exc, RPCError) and exc.status == 404
                    late = loop.time() - began >= NOT_FOUND_GRACE
                    if missing and late and (parent in never if parent != wid else wid not in acknowledged):
                        never.add(wid)
                        continue
                    still.append(wid)  # not found yet (a child not started yet) or unreachable
                    continue
                if status.name != "RUNNING":
                    continue
                still.append(wid)
                waiting = self.ledger.started_types.get(wid) in WAIT_FOR_FINISH
                if waiting and loop.time() - nudged.get(wid, began) >= 10:
                    nudged[wid] = loop.time()
                    await self.signal(wid, FINISH_SIGNAL)
            open_ids = still
            if open_ids:
                await asyncio.sleep(1.0)
        return open_ids
