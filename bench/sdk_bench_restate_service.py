"""The Restate side of the SDK benchmark, application half: the workflows as a Restate service.

Run by ``bench/sdk_bench_restate.py`` in its own process: ``python
bench/sdk_bench_restate_service.py --port N`` serves the handlers below as an ASGI app with
hypercorn (HTTP/2 cleartext, one process) on 127.0.0.1:N until SIGTERM; the Restate server
calls them once the deployment is registered. Needs ``restate-sdk`` and ``hypercorn``
(requirements-bench.txt).

The shapes match the other systems' workflows:

* ``OneStep``: a workflow whose step is a call to another service's handler
  (``BenchStep/step``), dispatched by the server like Chronicle's activity through a queue;
* ``OneLocalStep``: a workflow whose step is a ``ctx.run`` block in its own process (a
  journaled side effect, like Chronicle's local activity and DBOS's step);
* ``TenSteps``: ten ``BenchStep/step`` calls one after another;
* ``SleepUntil``: a durable ``ctx.sleep`` until an epoch instant; returns how late the
  handler went on after it (seconds), as the others return how late their wake-up ran.
"""

# Without restate-sdk installed (CI type-checks bench/ with the dev requirements only) its
# decorators are untyped, as with DBOS in pyproject.toml.
# mypy: disallow-untyped-decorators=False

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from datetime import timedelta

import restate  # type: ignore[import-not-found, unused-ignore]
from hypercorn.asyncio import serve  # type: ignore[import-not-found, unused-ignore]
from hypercorn.config import Config  # type: ignore[import-not-found, unused-ignore]
from restate.server import install_shutdown_hook  # type: ignore[import-not-found, unused-ignore]

steps = restate.Service("BenchStep")
one_step = restate.Workflow("OneStep")
one_local_step = restate.Workflow("OneLocalStep")
ten_steps = restate.Workflow("TenSteps")
sleep_until = restate.Workflow("SleepUntil")


async def bench_step(i: int) -> int:
    """The work of one step: none, so the figures are the system's own cost."""
    return i


@steps.handler("step")
async def step(ctx: restate.Context, i: int) -> int:
    return await bench_step(i)


@one_step.main("run")
async def run_one_step(ctx: restate.WorkflowContext) -> int:
    result: int = await ctx.service_call(step, arg=1)
    return result


@one_local_step.main("run")
async def run_one_local_step(ctx: restate.WorkflowContext) -> int:
    result: int = await ctx.run_typed("step", bench_step, i=1)
    return result


@ten_steps.main("run")
async def run_ten_steps(ctx: restate.WorkflowContext) -> int:
    total = 0
    for i in range(10):
        total += await ctx.service_call(step, arg=i)
    return total


@sleep_until.main("run")
async def run_sleep_until(ctx: restate.WorkflowContext, due: float) -> float:
    await ctx.sleep(timedelta(seconds=max(0.001, due - time.time())))
    return time.time() - due


SHUTDOWN_GRACE_S = 5.0

app = restate.app(services=[steps, one_step, one_local_step, ten_steps, sleep_until])


def hypercorn_config(port: int) -> Config:
    """One process; streams and keep-alive unbounded, as Restate advises for hypercorn in
    production (the server keeps one HTTP/2 stream open per running invocation)."""
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.h2_max_concurrent_streams = 2**31 - 1
    config.keep_alive_max_requests = 2**31 - 1
    config.keep_alive_timeout = 2**31 - 1
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "ERROR"
    return config


async def main(port: int) -> None:
    """Serve until SIGTERM or SIGINT. Hypercorn's graceful shutdown can wait without end for
    connections the server keeps open (HTTP/2, idle for minutes), so after a few seconds the
    process just exits: it holds no state of its own."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # The SDK's app takes SIGTERM over on its first request with one dispatcher per loop that
    # runs every hook registered through it, so the stop goes there rather than beside it.
    install_shutdown_hook(loop, stop.set, signal.SIGTERM)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    server = asyncio.ensure_future(serve(app, hypercorn_config(port), shutdown_trigger=stop.wait))
    await asyncio.wait([server, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
    done, _ = await asyncio.wait([server], timeout=SHUTDOWN_GRACE_S)
    if not done:
        os._exit(0)
    server.result()  # re-raises a failure to serve (a port in use, ...)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(main(parser.parse_args().port))
