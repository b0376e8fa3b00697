"""Faults in what the stack is sent or runs: poison activities, a nondeterministic deploy,
a signal storm, payloads at the namespace's limit.

Every run these faults start goes through the load (:class:`~bench.faults.load.Load`), so
the ledger holds it and the checker judges it with the rest after the drain; each probe
here checks the fault's own promise at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from sdk.exceptions import RPCError

from .checker import order_violations
from .faults_base import NemesisBase
from .load import TIMER_SECONDS, WORK_SECONDS, Op
from .stack import DEPLOY_QUEUE
from .workflows import BLOB_SIGNAL, FINISH_SIGNAL, HANG_ATTEMPTS, POISON_ATTEMPTS, REORDERED, TOKEN_SIGNAL

NONDETERMINISM = "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"
HANG_SECONDS = 3.0  # the hanging activity sleeps this long, past its 1 s start_to_close timeout
# Per poison activity, what its history must record: the close event, its retry state,
# the timeout's type (a timeout only) and the last attempt; and the class of the error the
# workflow caught (``ActivityError.__cause__``).
POISON_EXPECTED: dict[str, tuple[str, str, str, int, str]] = {
    "faults_always_fails": (
        "ActivityTaskFailed",
        "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED",
        "",
        POISON_ATTEMPTS,
        "ApplicationError",
    ),
    "faults_fails_non_retryable": (
        "ActivityTaskFailed",
        "RETRY_STATE_NON_RETRYABLE_FAILURE",
        "",
        1,
        "ApplicationError",
    ),
    "faults_hangs": (
        "ActivityTaskTimedOut",
        "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED",
        "START_TO_CLOSE",
        HANG_ATTEMPTS,
        "TimeoutError",
    ),
}
CALLED_AS = {
    "faults_always_fails": "always_fails",
    "faults_fails_non_retryable": "non_retryable",
    "faults_hangs": "hangs",
}
STORM_SIGNALS = 500
STORM_RUNS = 3
DEPLOY_RUNS = 3
# Events a workflow task that failed may leave behind: nothing its commands would have added.
NO_COMMANDS = {
    "WorkflowTaskScheduled",
    "WorkflowTaskStarted",
    "WorkflowTaskFailed",
    "WorkflowTaskTimedOut",
    "WorkflowExecutionSignaled",
}


def payload_size(value: Any) -> int:
    """A value's size as the server's limit counts it: its compact JSON."""
    return len(json.dumps(value, separators=(",", ":"), default=str))


def type_name(value: Any) -> str:
    """An activity type as the history writes it: ``{"name": ...}`` (or a bare name)."""
    return str(value.get("name") if isinstance(value, dict) else value)


def fit(size_of: Callable[[int], int], target: int) -> int:
    """The largest ``n`` with ``size_of(n) <= target`` (``size_of`` grows with ``n``)."""
    low, high = 0, target
    while low < high:
        middle = (low + high + 1) // 2
        if size_of(middle) <= target:
            low = middle
        else:
            high = middle - 1
    return low


class DataFaults(NemesisBase):
    # -- poison activities --------------------------------------------------------
    async def poison(self) -> bool:
        """A run calls an activity that always fails (3 attempts), one that refuses for good,
        one that hangs past its start_to_close timeout (2 attempts); beside it a canary
        parent-and-child run must finish as usual."""
        stats = self.stats["poison"]
        began = time.monotonic()
        wid, canary = self.wid("poison"), self.wid("canary")
        ops = await asyncio.gather(
            self.load.start("FaultsPoison", wid, [HANG_SECONDS]),
            self.load.start("FaultsParent", canary, [TIMER_SECONDS, WORK_SECONDS]),
        )
        if any(op.outcome != "ok" for op in ops):
            stats.notes.append(f"start not acknowledged: {[op.detail for op in ops]}")
            return False
        status = await self.closed([wid, canary, f"{canary}-child"], 45)
        stats.figure("poison run s", time.monotonic() - began)
        if set(status.values()) != {"COMPLETED"}:
            stats.notes.append(f"not completed within 45 s: {status}")
            return False
        outcomes: dict[str, str] = await self.client.get_workflow_handle(wid).result()
        return self.poison_as_documented(await self.events(wid), outcomes)

    def poison_as_documented(self, events: list[dict[str, Any]], outcomes: dict[str, str]) -> bool:
        """Each poison activity closed as its policy says, in the history (the server's
        record) and in what the workflow caught."""
        stats = self.stats["poison"]
        scheduled = {
            int(e["event_id"]): type_name(e["attributes"].get("activity_type"))
            for e in events
            if e["event_type"] == "ActivityTaskScheduled"
        }
        attempts = {
            int(e["attributes"].get("scheduled_event_id") or 0): e["attributes"].get("attempt")
            for e in events
            if e["event_type"] == "ActivityTaskStarted"
        }
        closes = {
            scheduled.get(int(e["attributes"].get("scheduled_event_id") or 0), "?"): e
            for e in events
            if e["event_type"] in ("ActivityTaskFailed", "ActivityTaskTimedOut", "ActivityTaskCompleted")
        }
        ok = True
        for kind, (event_type, retry_state, timeout, attempt, caught) in POISON_EXPECTED.items():
            close = closes.get(kind)
            if close is None:
                stats.notes.append(f"{kind}: no close event")
                ok = False
                continue
            attributes = close["attributes"]
            info = (attributes.get("failure") or {}).get("timeout_failure_info") or {}
            seen = (
                close["event_type"],
                attributes.get("retry_state"),
                info.get("timeout_type", ""),
                attempts.get(int(attributes.get("scheduled_event_id") or 0)),
            )
            if seen != (event_type, retry_state, timeout, attempt):
                stats.notes.append(
                    f"{kind}: history has {seen}, expected {(event_type, retry_state, timeout, attempt)}"
                )
                ok = False
            if not outcomes.get(CALLED_AS[kind], "").startswith(caught):
                stats.notes.append(
                    f"{kind}: the workflow caught {outcomes.get(CALLED_AS[kind])!r}, not {caught}"
                )
                ok = False
        return ok

    # -- a nondeterministic deploy ------------------------------------------------
    async def wait_for(self, wid: str, done: Callable[[list[dict[str, Any]]], bool], within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                if done(await self.events(wid)):
                    return True
            except RPCError:
                pass
            await asyncio.sleep(0.3)
        return False

    async def deploy(self) -> bool:
        """Runs of ``FaultsMixed`` on the deploy queue reach their wait for ``finish``; the
        queue's worker is replaced by one whose ``FaultsMixed`` runs the activity before the
        timer; a signal makes each run's next workflow task replay there: it must fail with
        the nondeterminism cause and write no command. The good worker comes back, ``finish``
        is sent, and each run completes."""
        stats = self.stats["deploy"]
        wids = [self.wid("deploy") for _ in range(DEPLOY_RUNS)]
        args = [1, TIMER_SECONDS, WORK_SECONDS]
        ops = await asyncio.gather(*(self.load.start("FaultsMixed", w, args, DEPLOY_QUEUE) for w in wids))
        wids = [op.workflow_id for op in ops if op.outcome == "ok"]

        def waiting(events: list[dict[str, Any]]) -> bool:
            kinds = [e["event_type"] for e in events]
            return "ActivityTaskCompleted" in kinds and kinds[-1] == "WorkflowTaskCompleted"

        ready = await asyncio.gather(*(self.wait_for(w, waiting, 30) for w in wids))
        if not wids or not all(ready):
            stats.notes.append(f"runs not waiting for finish within 30 s: {ready}")
            return False
        lengths = {w: len(await self.events(w)) for w in wids}
        await asyncio.to_thread(self.stack.redeploy, REORDERED)
        self.note("deploy", "bad worker up", runs=wids)
        await asyncio.gather(*(self.load.signal(w, TOKEN_SIGNAL) for w in wids))

        def refused(events: list[dict[str, Any]]) -> bool:
            return any(
                e["event_type"] == "WorkflowTaskFailed" and e["attributes"].get("cause") == NONDETERMINISM
                for e in events
            )

        failed = await asyncio.gather(*(self.wait_for(w, refused, 30) for w in wids))
        await asyncio.sleep(1.0)  # the bad worker's retries, if the server hands the task back
        ok = all(failed)
        if not ok:
            stats.notes.append(f"no nondeterminism failure within 30 s: {failed}")
        for wid in wids:
            written = (await self.events(wid))[lengths[wid] :]
            commands = sorted({e["event_type"] for e in written} - NO_COMMANDS)
            stats.figure(
                "WorkflowTaskFailed per run", sum(e["event_type"] == "WorkflowTaskFailed" for e in written)
            )
            if commands:
                stats.notes.append(f"the bad deploy wrote {commands}")
                ok = False
        await asyncio.to_thread(self.stack.redeploy, "")
        self.note("deploy", "good worker back")
        finished = time.monotonic()
        await asyncio.gather(*(self.load.signal(w, FINISH_SIGNAL) for w in wids))
        status = await self.closed(wids, 45)
        stats.figure("complete after the good worker s", time.monotonic() - finished)
        if set(status.values()) != {"COMPLETED"}:
            stats.notes.append(f"not completed after the good worker came back: {status}")
            ok = False
        return ok

    # -- a signal storm -----------------------------------------------------------
    async def storm(self) -> bool:
        """:data:`STORM_SIGNALS` signals sent at once over :data:`STORM_RUNS` waiting runs;
        each acknowledged one must be in its run's history once, in acknowledgement order."""
        stats = self.stats["storm"]
        targets = [self.wid("storm") for _ in range(STORM_RUNS)]
        ops = await asyncio.gather(
            *(self.load.start("FaultsMixed", w, [0, TIMER_SECONDS, 0.0]) for w in targets)
        )
        targets = [op.workflow_id for op in ops if op.outcome == "ok"]
        if not targets:
            return False
        began = time.monotonic()
        sends = [self.load.signal(targets[i % len(targets)], TOKEN_SIGNAL) for i in range(STORM_SIGNALS)]
        signals: list[Op] = list(await asyncio.gather(*sends))
        stats.figure("storm answered s", time.monotonic() - began)
        await asyncio.gather(*(self.load.signal(w, FINISH_SIGNAL) for w in targets))
        status = await self.closed(targets, 60)
        ok = set(status.values()) == {"COMPLETED"}
        if not ok:
            stats.notes.append(f"storm targets not completed within 60 s: {status}")
        outcomes = [s.outcome for s in signals]
        stats.figure("signals not acknowledged", len(outcomes) - outcomes.count("ok"))
        for wid in targets:
            ok = (
                self.storm_applied(wid, await self.events(wid), [s for s in signals if s.workflow_id == wid])
                and ok
            )
        return ok

    def storm_applied(self, wid: str, events: list[dict[str, Any]], sent: list[Op]) -> bool:
        stats = self.stats["storm"]
        where: dict[str, list[int]] = {}
        for event in events:
            attributes = event["attributes"]
            if (
                event["event_type"] == "WorkflowExecutionSignaled"
                and attributes.get("signal_name") == TOKEN_SIGNAL
            ):
                values = self.client.data_converter.from_payloads(attributes.get("input") or [])
                where.setdefault(str(values[0]), []).append(int(event["event_id"]))
        ok = True
        for op in sent:
            times = len(where.get(op.key, []))
            if (op.outcome == "ok" and times != 1) or times > 1 or (op.outcome == "failed" and times):
                stats.notes.append(f"{wid}: {op.outcome} signal {op.key} applied {times}x")
                ok = False
        placed = [(where[op.key][0], op.sent, op.at) for op in sent if op.outcome == "ok" and op.key in where]
        if violations := order_violations(placed):
            stats.notes.append(f"{wid}: {violations} signal(s) recorded before one acknowledged earlier")
            ok = False
        return ok

    # -- payloads at the limit ----------------------------------------------------
    async def payloads(self) -> bool:
        """A start and a signal just over the namespace's payload limit are refused with a
        4xx and change nothing; an input, a signal and a result just under it are accepted
        and come back whole."""
        stats = self.stats["payloads"]
        limit = await asyncio.to_thread(self.namespace_limit)
        to_payloads = self.client.data_converter.to_payloads
        blob = self.rng.randbytes(limit).hex()

        def input_size(n: int) -> int:
            return payload_size(to_payloads([blob[:n]]))

        def signal_size(n: int) -> int:
            return payload_size(to_payloads(["tok-" + "0" * 40, blob[:n]]))

        # Under by at most 256 bytes, so the echoed result (its command's attributes wrap
        # the same payload) stays under too; over by at most 64 bytes.
        under_in, over_in, under_sig, over_sig = await asyncio.gather(
            asyncio.to_thread(fit, input_size, limit - 256),
            asyncio.to_thread(fit, input_size, limit + 64),
            asyncio.to_thread(fit, signal_size, limit - 256),
            asyncio.to_thread(fit, signal_size, limit + 64),
        )
        stats.figure("limit bytes", limit)
        over_start = await self.load.start("FaultsEcho", self.wid("payload-over"), [blob[:over_in]])
        ok = self.refused(over_start, "start over the limit")
        try:
            await self.client.get_workflow_handle(over_start.workflow_id).describe()
            stats.notes.append("a start refused for its size left a run")
            ok = False
        except RPCError as exc:
            ok = exc.status == 404 and ok
        echo = await self.load.start("FaultsEcho", self.wid("payload"), [blob[:under_in]])
        if echo.outcome != "ok":
            stats.notes.append(f"start under the limit not acknowledged: {echo.detail}")
            return False
        over_signal = await self.load.signal(echo.workflow_id, BLOB_SIGNAL, (blob[:over_sig],))
        ok = self.refused(over_signal, "signal over the limit") and ok
        under_signal = await self.load.signal(echo.workflow_id, BLOB_SIGNAL, (blob[:under_sig],))
        if under_signal.outcome != "ok":
            stats.notes.append(f"signal under the limit not acknowledged: {under_signal.detail}")
            return False
        status = await self.closed([echo.workflow_id], 45)
        if status[echo.workflow_id] != "COMPLETED":
            stats.notes.append(f"echo run {status[echo.workflow_id]} after 45 s")
            return False
        result = await self.client.get_workflow_handle(echo.workflow_id).result()
        if result != blob[:under_in]:
            stats.notes.append("the result differs from the input it echoes")
            ok = False
        signalled = [
            e for e in await self.events(echo.workflow_id) if e["event_type"] == "WorkflowExecutionSignaled"
        ]
        values = [
            self.client.data_converter.from_payloads(e["attributes"].get("input") or []) for e in signalled
        ]
        if values != [[under_signal.key, blob[:under_sig]]]:
            stats.notes.append(
                f"signals in history: {[v[0] for v in values]}, expected only {under_signal.key}"
            )
            ok = False
        return ok

    def refused(self, op: Op, what: str) -> bool:
        if op.outcome != "failed":
            self.stats["payloads"].notes.append(f"{what}: {op.outcome} {op.detail[:80]}")
            return False
        return True
