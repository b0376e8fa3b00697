"""The DBOS Transact side of the SDK benchmark: the same workloads as a DBOS application.

Run by ``bench/sdk_bench.py`` in its own process: ``python bench/sdk_bench_dbos.py
--database-url URL [plan options]``; progress on stderr, the figures as JSON on stdout.
DBOS runs workflows inside the application process and keeps their state in the system
database given by URL (created on launch, dropped by the caller).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable

from dbos import DBOS, DBOSConfig
from proc_cpu import CpuSnapshot, backend_pids, cpu_by_pid
from sdk_bench_workloads import CpuProbe, Plan, measure


@DBOS.step()
async def bench_step(i: int) -> int:
    return i


@DBOS.workflow()
async def one_step() -> int:
    return int(await bench_step(1))


@DBOS.workflow()
async def ten_steps() -> int:
    total = 0
    for i in range(10):
        total += await bench_step(i)
    return total


@DBOS.workflow()
async def sleep_until(due: float) -> float:
    await DBOS.sleep_async(max(0.001, due - time.time()))
    return time.time() - due


class DbosSystem:
    """The three workload calls as DBOS workflows started by id and awaited."""

    async def one_step(self, key: str) -> None:
        handle = await DBOS.start_workflow_async(one_step)
        await handle.get_result()

    async def one_local_step(self, key: str) -> None:
        await self.one_step(key)  # a DBOS step always runs in the workflow's own process

    async def ten_steps(self, key: str) -> None:
        handle = await DBOS.start_workflow_async(ten_steps)
        await handle.get_result()

    async def start_sleep(self, key: str, due: float) -> Callable[[], Awaitable[float]]:
        handle = await DBOS.start_workflow_async(sleep_until, due)

        async def lateness() -> float:
            value: float = await handle.get_result()
            return value

        return lateness


def log(message: str) -> None:
    print(f"[dbos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse(argv: list[str]) -> tuple[str, Plan]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    Plan.add_arguments(parser)
    ns = parser.parse_args(argv)
    return str(ns.database_url), Plan.from_arguments(ns)


def dbos_cpu_probe(url: str) -> CpuProbe:
    """CPU by part: this process (application, workflows and steps together) and PostgreSQL."""

    def probe() -> dict[str, CpuSnapshot]:
        return {"application": cpu_by_pid({os.getpid()}), "postgres": cpu_by_pid(backend_pids(url))}

    return probe


def main(argv: list[str]) -> int:
    url, plan = parse(argv)
    config: DBOSConfig = {"name": "sdk-bench", "system_database_url": url, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    try:
        figures = asyncio.run(measure(DbosSystem(), plan, log, dbos_cpu_probe(url)))
    finally:
        DBOS.destroy()
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
