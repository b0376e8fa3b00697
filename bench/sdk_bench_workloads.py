"""The SDK benchmark's workloads, written once and run against each durable-execution system.

A system is anything with the calls of :class:`System`; ``measure`` drives them the same
way for Chronicle, DBOS and Restate so the figures side by side compare like with like.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from proc_cpu import CpuSnapshot, cpu_used

Json = dict[str, Any]
# Called before and after a workload: each group of processes (a server's frontends, its
# worker, the PostgreSQL backends, ...) and the CPU seconds its processes have used so far.
CpuProbe = Callable[[], dict[str, CpuSnapshot]]


class System(Protocol):
    """One durable-execution system, seen from application code."""

    async def one_step(self, key: str) -> None:
        """Start a workflow that runs one activity (step) and wait for its result."""

    async def one_local_step(self, key: str) -> None:
        """The one-step workflow with its step run where the workflow runs (Chronicle: a local
        activity, no round trip through a task queue; DBOS: a step, which always runs so;
        Restate: a ``ctx.run`` block in the workflow's handler)."""

    async def ten_steps(self, key: str) -> None:
        """Start a workflow that runs ten activities one after another and wait for its result."""

    async def start_sleep(self, key: str, due: float) -> Callable[[], Awaitable[float]]:
        """Start a workflow that durably sleeps until epoch ``due``; the callable returns its lateness (s)."""


def sizes(text: str) -> tuple[int, ...]:
    """A comma-separated list of counts, as ``--sleeps 200,2000`` gives it."""
    values = tuple(int(part) for part in text.split(",") if part.strip())
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected counts such as 200,2000, got {text!r}")
    return values


@dataclass(frozen=True)
class Plan:
    """How much of each workload to run."""

    sequential: int = 100
    concurrent: int = 1000
    concurrency: int = 32
    ten_step_runs: int = 10
    sleeps: tuple[int, ...] = (200, 2000)  # one sleep storm per size, in turn
    warmup: int = 20

    def as_args(self) -> list[str]:
        """The command-line options that give this plan to another bench process."""
        return [f"--{name.replace('_', '-')}={_arg(value)}" for name, value in self.__dict__.items()]

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        for name, default in Plan().__dict__.items():
            kind = sizes if isinstance(default, tuple) else int
            parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default)

    @staticmethod
    def from_arguments(ns: argparse.Namespace) -> Plan:
        return Plan(**{name: getattr(ns, name) for name in Plan().__dict__})


def _arg(value: int | tuple[int, ...]) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def pct(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100.0 * (len(ordered) - 1))))]


def latency_summary(seconds: list[float]) -> Json:
    ms = [s * 1000.0 for s in seconds]
    return {"n": len(ms), "p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99), "max_ms": max(ms) if ms else None}


async def _timed(call: Callable[[str], Awaitable[None]], key: str, into: list[float]) -> None:
    t0 = time.perf_counter()
    await call(key)
    into.append(time.perf_counter() - t0)


def cpu_per_workflow(before: dict[str, CpuSnapshot], after: dict[str, CpuSnapshot], workflows: int) -> Json:
    """Milliseconds of CPU each group spent per workflow between two probes, and their total."""
    per = {
        group: cpu_used(before.get(group, {}), snap) * 1000.0 / max(1, workflows)
        for group, snap in after.items()
    }
    return {**per, "total": sum(per.values())}


async def run_at_concurrency(
    call: Callable[[str], Awaitable[None]],
    prefix: str,
    total: int,
    concurrency: int,
    cpu: CpuProbe | None = None,
) -> Json:
    """``total`` workflows, ``concurrency`` in flight at any time: throughput and latency,
    and with ``cpu`` the CPU each group of processes spent per workflow."""
    latencies: list[float] = []
    keys = iter(range(total))

    async def lane() -> None:
        for i in keys:
            await _timed(call, f"{prefix}-{i}", latencies)

    before = cpu() if cpu is not None else {}
    t0 = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    figures: Json = {
        "workflows": total,
        "concurrency": concurrency,
        "seconds": elapsed,
        "workflows_per_s": total / elapsed,
        "latency": latency_summary(latencies),
    }
    if cpu is not None:
        figures["cpu_ms_per_workflow"] = cpu_per_workflow(before, cpu(), total)
    return figures


async def run_sleeps(
    system: System, prefix: str, count: int, start_concurrency: int, cpu: CpuProbe | None = None
) -> Json:
    """``count`` workflows whose durable sleeps all fall due at the same instant; with
    ``cpu``, the CPU each group of processes spent per woken workflow from the instant on."""
    lead = 3.0 + count / 50.0  # long enough to start them all before the instant
    due = time.time() + lead
    gate = asyncio.Semaphore(start_concurrency)

    async def start(i: int) -> Callable[[], Awaitable[float]]:
        async with gate:
            return await system.start_sleep(f"{prefix}-{i}", due)

    waiters = await asyncio.gather(*(start(i) for i in range(count)))
    margin = due - time.time()

    async def lateness(wait: Callable[[], Awaitable[float]]) -> float:
        async with gate:
            return await wait()

    await asyncio.sleep(max(0.0, due - time.time()))
    before = cpu() if cpu is not None else {}
    late = await asyncio.gather(*(lateness(w) for w in waiters))
    figures: Json = {"sleeps": count, "start_margin_s": margin, "lateness": latency_summary(list(late))}
    if cpu is not None:
        figures["cpu_ms_per_workflow"] = cpu_per_workflow(before, cpu(), count)
    return figures


async def measure(
    system: System, plan: Plan, log: Callable[[str], None], cpu: CpuProbe | None = None
) -> Json:
    """Every workload in order, warm-up first; the figures as one JSON-able dict.

    With ``cpu``, the concurrent one-step phases and the sleep storms also report the CPU
    per workflow by group of processes: there the machine is busy, so that is the cost that
    bounds throughput and lateness."""
    log(f"warm-up: {plan.warmup} one-step workflows")
    await run_at_concurrency(system.one_step, "warm", plan.warmup, min(plan.warmup, plan.concurrency))
    log(f"one-step workflows, one at a time: {plan.sequential}")
    sequential = await run_at_concurrency(system.one_step, "seq", plan.sequential, 1)
    log(f"one-step workflows, {plan.concurrency} at a time: {plan.concurrent}")
    concurrent = await run_at_concurrency(system.one_step, "conc", plan.concurrent, plan.concurrency, cpu)
    log(f"local-step workflows: {plan.sequential} in turn, {plan.concurrent} {plan.concurrency} at a time")
    local_sequential = await run_at_concurrency(system.one_local_step, "lseq", plan.sequential, 1)
    local_concurrent = await run_at_concurrency(
        system.one_local_step, "lconc", plan.concurrent, plan.concurrency, cpu
    )
    log(f"ten-step workflow, {plan.ten_step_runs} runs one after another")
    ten = await run_at_concurrency(system.ten_steps, "ten", plan.ten_step_runs, 1)
    sleeps: Json = {}
    for count in plan.sleeps:
        log(f"{count} durable sleeps due at the same instant")
        sleeps[str(count)] = await run_sleeps(system, f"sleep{count}", count, plan.concurrency, cpu)
    return {
        "sequential": sequential,
        "concurrent": concurrent,
        "local_sequential": local_sequential,
        "local_concurrent": local_concurrent,
        "ten_steps": ten,
        "sleeps": sleeps,
    }
