"""``chronicle workflow ...``: start, execute, signal, query, describe, show, list, count,
cancel, terminate, reset and result, with Temporal's CLI flags (``--type``,
``-t/--task-queue``, ``-w/--workflow-id``, ``-r/--run-id``, ``-i/--input``, ``-q/--query``).

Each command is a thin layer over ``sdk.client.Client`` and its ``WorkflowHandle``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sdk.cli.connection import common_options, options, run
from sdk.cli.history import EVENT_HEADER, decode_payloads, event_line, event_row, history_events
from sdk.cli.inputs import DURATION, execution_options, input_options, json_inputs, key_values, upper_snake
from sdk.cli.output import Column, emit, format_line, format_record, format_rows, note
from sdk.cli.workflow_update import update

if TYPE_CHECKING:
    from sdk.client import Client, WorkflowHandle

F = TypeVar("F", bound=Callable[..., Any])

LIST_COLUMNS = [
    Column("Status", "status"),
    Column("Workflow ID", "workflow_id"),
    Column("Run ID", "run_id"),
    Column("Type", "workflow_type"),
    Column("Task Queue", "task_queue"),
    Column("Start Time", "start_time"),
    Column("Close Time", "close_time"),
]
ID_REUSE = ("AllowDuplicate", "AllowDuplicateFailedOnly", "RejectDuplicate", "TerminateIfRunning")
ID_CONFLICT = ("Fail", "UseExisting", "TerminateExisting")
RESET_TYPES = ("FirstWorkflowTask", "LastWorkflowTask")


@click.group(name="workflow")
def workflow() -> None:
    """Start, signal, query, inspect and end workflows."""


# The flags every command on one execution takes, shared with ``workflow update``.
_execution = execution_options
_inputs = input_options


def _handle(client: Client, workflow_id: str, run_id: str | None) -> WorkflowHandle:
    return client.get_workflow_handle(workflow_id, run_id=run_id)


def _show(ctx: click.Context, record: dict[str, Any]) -> None:
    emit(format_record(record, options(ctx).output))


def _start_options(command: F) -> F:
    """The flags of ``start`` and ``execute`` (Temporal's names)."""
    flags = [
        click.option("--type", "workflow_type", required=True, help="Workflow type name."),
        click.option("-t", "--task-queue", required=True, help="Task queue the workers poll."),
        click.option("-w", "--workflow-id", help="Workflow id (default: a new UUID)."),
        click.option("--execution-timeout", type=DURATION, help="Whole execution, all runs (e.g. 1h)."),
        click.option("--run-timeout", type=DURATION, help="One run."),
        click.option("--task-timeout", type=DURATION, help="One workflow task (default 10s)."),
        click.option("--start-delay", type=DURATION, help="Wait this long before the first task."),
        click.option("--cron", "cron_schedule", default="", help="Cron schedule for the workflow."),
        click.option("--id-reuse-policy", type=click.Choice(ID_REUSE), help="If a closed run has the id."),
        click.option("--id-conflict-policy", type=click.Choice(ID_CONFLICT), help="If a running one has it."),
        click.option("--memo", multiple=True, metavar="KEY=JSON", help="A memo entry (repeat for more)."),
        click.option(
            "--search-attribute", "search_attributes", multiple=True, metavar="KEY=JSON",
            help="A search attribute value (repeat for more); the attribute must exist.",
        ),
    ]  # fmt: skip
    for flag in reversed(flags):
        command = flag(command)
    return _inputs(command)


async def _start(client: Client, params: dict[str, Any]) -> WorkflowHandle:
    from sdk.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

    reuse, conflict = params["id_reuse_policy"], params["id_conflict_policy"]
    return await client.start_workflow(
        params["workflow_type"],
        args=json_inputs(params["inputs"], params["input_file"]),
        id=params["workflow_id"] or str(uuid.uuid4()),
        task_queue=params["task_queue"],
        execution_timeout=params["execution_timeout"],
        run_timeout=params["run_timeout"],
        task_timeout=params["task_timeout"],
        start_delay=params["start_delay"],
        cron_schedule=params["cron_schedule"],
        id_reuse_policy=_enum(WorkflowIDReusePolicy, reuse, WorkflowIDReusePolicy.ALLOW_DUPLICATE),
        id_conflict_policy=_enum(WorkflowIDConflictPolicy, conflict, WorkflowIDConflictPolicy.UNSPECIFIED),
        memo=key_values(params["memo"], "--memo"),
        search_attributes=key_values(params["search_attributes"], "--search-attribute") or None,
    )


def _enum(kind: Any, choice: str | None, default: Any) -> Any:
    """A policy enum member from its Temporal CLI spelling (``RejectDuplicate``)."""
    if not choice:
        return default
    return kind[upper_snake(choice)]


def _started(handle: WorkflowHandle, params: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {
        "workflow_id": handle.id,
        "run_id": handle.run_id,
        "workflow_type": params["workflow_type"],
        "task_queue": params["task_queue"],
        "namespace": namespace,
    }


@workflow.command()
@_start_options
@common_options
@click.pass_context
def start(ctx: click.Context, /, **params: Any) -> None:
    """Start a workflow execution and print its ids."""

    async def call(client: Client) -> dict[str, Any]:
        return _started(await _start(client, params), params, client.namespace)

    _show(ctx, run(ctx, call))


@workflow.command()
@_start_options
@common_options
@click.pass_context
def execute(ctx: click.Context, /, **params: Any) -> None:
    """Start a workflow execution and wait for its result (exit 1 if it does not complete)."""

    async def call(client: Client) -> dict[str, Any]:
        handle = await _start(client, params)
        note(f"started {handle.id} (run {handle.run_id}); waiting for the result")
        result = await handle.result()
        return {**_started(handle, params, client.namespace), "status": "Completed", "result": result}

    _show(ctx, run(ctx, call))


@workflow.command()
@_execution
@common_options
@click.pass_context
def result(ctx: click.Context, workflow_id: str, run_id: str | None) -> None:
    """Wait for a workflow to close and print its result (exit 1 if it did not complete)."""

    async def call(client: Client) -> dict[str, Any]:
        value = await _handle(client, workflow_id, run_id).result()
        return {"workflow_id": workflow_id, "status": "Completed", "result": value}

    _show(ctx, run(ctx, call))


@workflow.command()
@_execution
@click.option("--name", required=True, help="Signal name.")
@_inputs
@common_options
@click.pass_context
def signal(
    ctx: click.Context,
    workflow_id: str,
    run_id: str | None,
    name: str,
    inputs: tuple[str, ...],
    input_file: str | None,
) -> None:
    """Send a signal to a workflow execution."""
    args = json_inputs(inputs, input_file)

    async def call(client: Client) -> dict[str, Any]:
        await _handle(client, workflow_id, run_id).signal(name, args=args)
        return {"workflow_id": workflow_id, "run_id": run_id, "signal": name, "sent": True}

    _show(ctx, run(ctx, call))


@workflow.command()
@_execution
@click.option("--type", "--name", "query_type", required=True, help="Query name.")
@_inputs
@common_options
@click.pass_context
def query(
    ctx: click.Context,
    workflow_id: str,
    run_id: str | None,
    query_type: str,
    inputs: tuple[str, ...],
    input_file: str | None,
) -> None:
    """Query a workflow execution (a worker must be polling its task queue) and print the answer."""
    args = json_inputs(inputs, input_file)

    async def call(client: Client) -> dict[str, Any]:
        answer = await _handle(client, workflow_id, run_id).query(query_type, args=args)
        return {"workflow_id": workflow_id, "query": query_type, "result": answer}

    _show(ctx, run(ctx, call))


@workflow.command()
@_execution
@common_options
@click.pass_context
def describe(ctx: click.Context, workflow_id: str, run_id: str | None) -> None:
    """Show a workflow execution's status, times, memo and search attributes."""

    async def call(client: Client) -> dict[str, Any]:
        description = await _handle(client, workflow_id, run_id).describe()
        record: dict[str, Any] = decode_payloads(description.raw, client.data_converter)
        return record

    _show(ctx, run(ctx, call))


@workflow.command()
@_execution
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events until the run closes.")
@common_options
@click.pass_context
def show(ctx: click.Context, workflow_id: str, run_id: str | None, follow: bool) -> None:
    """Print a run's event history (json/jsonl: the events as the server wrote them)."""
    fmt = options(ctx).output

    async def call(client: Client) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        async for event in history_events(client, workflow_id, run_id, follow=follow):
            if fmt == "table":
                if event.get("event_id") == 1:  # the header once the run is known to exist
                    emit(EVENT_HEADER + "\n")
                emit(event_line(event_row(event, client.data_converter)) + "\n")
            elif fmt == "jsonl":
                emit(format_line(event))
            else:
                kept.append(event)
        return kept

    events = run(ctx, call)
    if fmt == "json":
        emit(format_rows(events, [], "json"))


@workflow.command(name="list")
@click.option("-q", "--query", default="", help="Visibility query, e.g. \"WorkflowType = 'Order'\".")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many executions.")
@common_options
@click.pass_context
def list_(ctx: click.Context, query: str, limit: int | None) -> None:
    """List workflow executions matching a visibility query, newest first."""

    fmt = options(ctx).output

    async def call(client: Client) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        async for row in client.list_workflows(query, limit=limit, page_size=100):
            if fmt == "jsonl":  # a line as each row comes: a long list starts printing at once
                emit(format_line(row.raw))
            else:
                rows.append(row.raw)
        return rows

    rows = run(ctx, call)
    if fmt != "jsonl":
        emit(format_rows(rows, LIST_COLUMNS, fmt))


@workflow.command()
@click.option("-q", "--query", default="", help="Visibility query; end it with GROUP BY ExecutionStatus.")
@common_options
@click.pass_context
def count(ctx: click.Context, query: str) -> None:
    """Count workflow executions matching a visibility query."""

    async def call(client: Client) -> dict[str, Any]:
        counted = await client.count_workflows(query)
        groups = [{"group": list(g.group_values), "count": g.count} for g in counted.groups]
        return {"count": counted.count, "groups": groups}

    counted = run(ctx, call)
    fmt = options(ctx).output
    if fmt != "table":
        emit(format_record(counted, fmt))
        return
    emit(f"Total: {counted['count']}\n")
    if counted["groups"]:
        rows = [{"group": ", ".join(map(str, g["group"])), "count": g["count"]} for g in counted["groups"]]
        emit(format_rows(rows, [Column("Group", "group"), Column("Count", "count")], fmt))


@workflow.command()
@_execution
@click.option("--reason", default="", help="Why (recorded in the history).")
@common_options
@click.pass_context
def cancel(ctx: click.Context, workflow_id: str, run_id: str | None, reason: str) -> None:
    """Ask a workflow execution to cancel (the workflow decides how to end)."""

    async def call(client: Client) -> dict[str, Any]:
        await _handle(client, workflow_id, run_id).cancel(reason)
        return {"workflow_id": workflow_id, "run_id": run_id, "cancel_requested": True}

    _show(ctx, run(ctx, call))


@workflow.command()
@_execution
@click.option("--reason", default="", help="Why (recorded in the history).")
@common_options
@click.pass_context
def terminate(ctx: click.Context, workflow_id: str, run_id: str | None, reason: str) -> None:
    """End a workflow execution at once, without running its code."""

    async def call(client: Client) -> dict[str, Any]:
        await _handle(client, workflow_id, run_id).terminate(reason)
        return {"workflow_id": workflow_id, "run_id": run_id, "terminated": True}

    _show(ctx, run(ctx, call))


@workflow.command()
@_execution
@click.option("-e", "--event-id", type=click.IntRange(min=1), help="A WorkflowTaskCompleted event id.")
@click.option("-t", "--type", "reset_type", type=click.Choice(RESET_TYPES), help="Or a reset point by kind.")
@click.option("--reason", required=True, help="Why (recorded on both runs).")
@click.option(
    "--reapply-type",
    type=click.Choice(["All", "Signal", "None"]),
    default="All",
    show_default=True,
    help="Deprecated: what to send again that came after the point (All: signals and updates). "
    "Use --reapply-exclude.",
)
@click.option(
    "--reapply-exclude",
    type=click.Choice(["All", "Signal", "Update"]),
    multiple=True,
    help="Do not send again the signals or updates that came after the point (repeatable).",
)
@common_options
@click.pass_context
def reset(
    ctx: click.Context,
    workflow_id: str,
    run_id: str | None,
    event_id: int | None,
    reset_type: str | None,
    reason: str,
    reapply_type: str,
    reapply_exclude: tuple[str, ...],
) -> None:
    """Start a new run from a workflow task of this one; the open run is terminated."""
    if (event_id is None) == (reset_type is None):
        raise click.UsageError("give exactly one of --event-id and --type")
    excluded = _reapply_excluded(reapply_type, reapply_exclude)

    async def call(client: Client) -> dict[str, Any]:
        new_run = await _handle(client, workflow_id, run_id).reset(
            event_id,
            reset_type=reset_type,
            reason=reason,
            reapply_signals="Signal" not in excluded,
            reapply_updates="Update" not in excluded,
        )
        return {"workflow_id": workflow_id, "run_id": new_run, "reset_from": run_id}

    _show(ctx, run(ctx, call))


def _reapply_excluded(reapply_type: str, reapply_exclude: tuple[str, ...]) -> set[str]:
    """What the reset leaves out, read as Temporal's CLI reads the two flags (one or the other)."""
    if reapply_type != "All" and reapply_exclude:
        raise click.UsageError("--reapply-type cannot be used with --reapply-exclude. Use --reapply-exclude")
    everything = {"Signal", "Update"}
    excluded = {"All": set(), "Signal": {"Update"}, "None": everything}[reapply_type]
    for kind in reapply_exclude:
        excluded |= everything if kind == "All" else {kind}
    return excluded


workflow.add_command(update)

COMMANDS = (workflow,)
