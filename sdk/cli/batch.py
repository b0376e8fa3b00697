"""``chronicle batch ...``: start, list, describe and stop batch operations (the REST
``batch-operations`` endpoints): cancel, terminate, signal or reset every run a visibility
query selects, at a bounded rate, on the server's batch runner.

``start --wait`` and ``describe --follow`` show the job's progress until it ends: a progress
bar on a terminal, a line each time it moves on a pipe (``jsonl``: one job object a line).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import click

from sdk.cli.connection import common_options, options, run
from sdk.cli.inputs import json_inputs
from sdk.cli.output import Column, emit, format_line, format_record, format_rows, note

if TYPE_CHECKING:
    from sdk.client import Client

OPERATIONS = ("cancel", "terminate", "signal", "reset")
RESET_TYPES = ("FirstWorkflowTask", "LastWorkflowTask")
POLL_SECONDS = 0.5
LIST_COLUMNS = [
    Column("Job ID", "job_id"),
    Column("Operation", "operation"),
    Column("State", "state"),
    Column("Done", "done"),
    Column("Failed", "failed"),
    Column("Total", "total"),
    Column("Query", "query"),
    Column("Created", "created_at"),
]


@click.group(name="batch")
def batch() -> None:
    """Jobs over every workflow a query selects.

    Cancel, terminate, signal or reset each run, at a bounded rate, on the server.
    """


def _job_path(job_id: str, suffix: str = "") -> str:
    return f"/batch-operations/{quote(job_id, safe='')}{suffix}"


async def _job(client: Client, job_id: str) -> dict[str, Any]:
    return await client.transport.get(_job_path(job_id)) or {}


def _finished(job: dict[str, Any]) -> bool:
    return job.get("state") != "Running"


def progress_line(job: dict[str, Any]) -> str:
    """``job 7f3a: terminate 40/100 done, 2 failed (42%) Running``."""
    total, done, failed = int(job.get("total") or 0), int(job.get("done") or 0), int(job.get("failed") or 0)
    share = round(100 * float(job.get("progress") or 0))
    return (
        f"job {job.get('job_id')}: {job.get('operation')} {done}/{total} done, {failed} failed "
        f"({share}%) {job.get('state')}"
    )


async def _follow(
    client: Client, job: dict[str, Any], report: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Read the job again until it ends, telling ``report`` each time it moved on."""
    seen: tuple[Any, ...] = ()
    while True:
        mark = (job.get("done"), job.get("failed"), job.get("state"))
        if mark != seen:
            report(job)
            seen = mark
        if _finished(job):
            return job
        await asyncio.sleep(POLL_SECONDS)
        job = await _job(client, str(job["job_id"]))


def _reporter(fmt: str) -> tuple[Callable[[dict[str, Any]], None], Callable[[], None]]:
    """How progress is shown: a rich bar on a terminal's stderr, else lines (jsonl on stdout)."""
    if fmt == "jsonl":
        return (lambda job: emit(format_line(job))), (lambda: None)
    if not sys.stderr.isatty():
        return (lambda job: note(progress_line(job))), (lambda: None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=False,
    )  # fmt: skip
    bar.start()
    task = bar.add_task("batch", total=None)

    def report(job: dict[str, Any]) -> None:
        processed = int(job.get("done") or 0) + int(job.get("failed") or 0)
        bar.update(
            task,
            description=f"{job.get('operation')} {job.get('state')}",
            completed=processed,
            total=int(job.get("total") or 0) or None,
        )

    return report, bar.stop


def _watch(ctx: click.Context, first: Callable[[Client], Any]) -> None:
    """Run ``first`` (which returns a job), follow it to its end, and print the final job."""
    fmt = options(ctx).output
    report, done = _reporter(fmt)

    async def call(client: Client) -> dict[str, Any]:
        job: dict[str, Any] = await first(client)
        return await _follow(client, job, report)

    started = time.monotonic()
    try:
        job = run(ctx, call)
    finally:
        done()
    if fmt != "jsonl":
        emit(format_record(job, fmt))
    if job.get("state") != "Completed":
        from sdk.cli.errors import CliError

        raise CliError(
            f"batch job {job.get('job_id')} ended {job.get('state')}: {job.get('stop_reason') or ''}"
        )
    note(f"finished in {time.monotonic() - started:.1f}s")


@batch.command()
@click.option("--operation", type=click.Choice(OPERATIONS), required=True, help="What to do to each run.")
@click.option("-q", "--query", required=True, help="Visibility query selecting the runs ('' for all).")
@click.option("--reason", required=True, help="Why (recorded on each run).")
@click.option("--job-id", default="", help="Job id (default: the server picks one).")
@click.option("--rps", type=click.FloatRange(min=0, min_open=True), help="Runs a second (default 50).")
@click.option("--signal-name", default="", help="signal: the signal to send.")
@click.option("-i", "--input", "inputs", multiple=True, metavar="JSON", help="signal: a JSON argument.")
@click.option("--reset-type", type=click.Choice(RESET_TYPES), help="reset: where each run restarts.")
@click.option(
    "--reapply-type", type=click.Choice(["Signal", "None"]), default="Signal", help="reset: signals."
)
@click.option("--dry-run", is_flag=True, help="Only count the runs the query selects.")
@click.option("--wait", is_flag=True, help="Show progress until the job ends (exit 1 unless it completes).")
@common_options
@click.pass_context
def start(ctx: click.Context, /, **p: Any) -> None:
    """Start a batch job over the runs a query selects."""
    if p["operation"] == "signal" and not p["signal_name"]:
        raise click.UsageError("--operation signal needs --signal-name")
    body: dict[str, Any] = {
        "operation": p["operation"],
        "query": p["query"],
        "reason": p["reason"],
        "job_id": p["job_id"],
        "dry_run": p["dry_run"],
        "reapply_signals": p["reapply_type"] == "Signal",
    }
    if p["rps"] is not None:
        body["rps"] = p["rps"]
    if p["reset_type"]:
        body["reset_type"] = p["reset_type"]
    if p["signal_name"]:
        body["signal_name"] = p["signal_name"]
    args = json_inputs(p["inputs"])

    async def create(client: Client) -> dict[str, Any]:
        body["identity"] = client.identity
        if p["signal_name"]:
            body["signal_input"] = client.data_converter.to_payloads(args)
        return await client.transport.post("/batch-operations", body, idempotent=False) or {}

    if p["wait"] and not p["dry_run"]:
        _watch(ctx, create)
        return
    emit(format_record(run(ctx, create), options(ctx).output))


@batch.command(name="list")
@common_options
@click.pass_context
def list_(ctx: click.Context) -> None:
    """List batch jobs, newest first."""

    async def call(client: Client) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = (await client.transport.get("/batch-operations") or {}).get("jobs") or []
        return jobs

    emit(format_rows(run(ctx, call), LIST_COLUMNS, options(ctx).output))


@batch.command()
@click.option("--job-id", required=True, help="Job id.")
@click.option("-f", "--follow", is_flag=True, help="Show progress until the job ends.")
@common_options
@click.pass_context
def describe(ctx: click.Context, job_id: str, follow: bool) -> None:
    """Show a batch job and its progress."""
    if follow:
        _watch(ctx, lambda client: _job(client, job_id))
        return
    emit(format_record(run(ctx, lambda client: _job(client, job_id)), options(ctx).output))


@batch.command()
@click.option("--job-id", required=True, help="Job id.")
@click.option("--reason", default="", help="Why.")
@common_options
@click.pass_context
def stop(ctx: click.Context, job_id: str, reason: str) -> None:
    """Stop a running batch job; runs it already processed stay processed."""

    async def call(client: Client) -> dict[str, Any]:
        return await client.transport.post(_job_path(job_id, "/stop"), {"reason": reason}) or {}

    emit(format_record(run(ctx, call), options(ctx).output))


COMMANDS = (batch,)
