"""``chronicle workflow update ...``: execute, start, result and describe, with Temporal's CLI
flags (``-w/--workflow-id``, ``-r/--run-id``, ``--name``, ``-i/--input``, ``--update-id``,
``--wait-for-stage``).

An update id makes a command safe to repeat: the server applies an id once and answers a
repeat with the first outcome. A rejected update or a failed handler exits 1 with the failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from sdk.cli.connection import common_options, options, run
from sdk.cli.errors import CliError, ExitCode
from sdk.cli.inputs import execution_options, input_options, json_inputs
from sdk.cli.output import emit, format_record

if TYPE_CHECKING:
    from sdk.client import Client, WorkflowUpdateHandle


@click.group(name="update")
def update() -> None:
    """Send updates to a workflow and read their outcome."""


def _update_flags(command: Any) -> Any:
    command = click.option("--update-id", help="Update id (default: a new UUID); a repeat is applied once.")(
        command
    )
    command = click.option(
        "--first-execution-run-id", help="Refuse unless the run belongs to the chain this run started."
    )(command)
    command = input_options(command)
    command = click.option("--name", required=True, help="Update name (the handler's).")(command)
    return execution_options(command)


async def _send(client: Client, params: dict[str, Any], stage_name: str) -> WorkflowUpdateHandle:
    from sdk._updates import start_update
    from sdk.client import WorkflowUpdateStage

    handle = client.get_workflow_handle(params["workflow_id"], run_id=params["run_id"])
    return await start_update(
        handle,
        params["name"],
        args=json_inputs(params["inputs"], params["input_file"]),
        wait_for_stage=WorkflowUpdateStage[stage_name],
        id=params["update_id"],
        first_execution_run_id=params["first_execution_run_id"],
    )


async def _outcome(pending: WorkflowUpdateHandle) -> Any:
    from sdk.client import WorkflowUpdateFailedError

    try:
        return await pending.result()
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause or exc
        raise CliError(f"update failed: {type(cause).__name__}: {cause}", ExitCode.FAILED) from exc


def _record(pending: WorkflowUpdateHandle, name: str | None = None, **more: Any) -> dict[str, Any]:
    record = {"workflow_id": pending.workflow_id, "run_id": pending.workflow_run_id, "update_id": pending.id}
    if name is not None:
        record["name"] = name
    return {**record, **more}


def _show(ctx: click.Context, record: dict[str, Any]) -> None:
    emit(format_record(record, options(ctx).output))


@update.command()
@_update_flags
@common_options
@click.pass_context
def execute(ctx: click.Context, /, **params: Any) -> None:
    """Send an update and wait for its handler's value (exit 1 if it is rejected or fails)."""

    async def call(client: Client) -> dict[str, Any]:
        pending = await _send(client, params, "COMPLETED")
        return _record(pending, params["name"], result=await _outcome(pending))

    _show(ctx, run(ctx, call))


@update.command()
@_update_flags
@click.option(
    "--wait-for-stage",
    type=click.Choice(["accepted", "completed"], case_sensitive=False),
    required=True,
    help="Return once the update is accepted (or completed).",
)
@common_options
@click.pass_context
def start(ctx: click.Context, /, wait_for_stage: str, **params: Any) -> None:
    """Send an update and print its id once it reaches the stage ('update result' waits for the
    rest)."""

    async def call(client: Client) -> dict[str, Any]:
        pending = await _send(client, params, wait_for_stage.upper())
        return _record(pending, params["name"], stage=wait_for_stage.upper())

    _show(ctx, run(ctx, call))


def _by_id(command: Any) -> Any:
    command = click.option("--update-id", required=True, help="The update's id.")(command)
    return execution_options(command)


@update.command()
@_by_id
@common_options
@click.pass_context
def result(ctx: click.Context, workflow_id: str, run_id: str | None, update_id: str) -> None:
    """Wait for an update sent before to complete and print its value (exit 1 if it failed)."""

    async def call(client: Client) -> dict[str, Any]:
        pending = client.get_workflow_handle(workflow_id, run_id=run_id).get_update_handle(update_id)
        return _record(pending, result=await _outcome(pending))

    _show(ctx, run(ctx, call))


@update.command()
@_by_id
@common_options
@click.pass_context
def describe(ctx: click.Context, workflow_id: str, run_id: str | None, update_id: str) -> None:
    """Show where an update stands: its stage and, once completed, its value or failure."""

    async def call(client: Client) -> dict[str, Any]:
        from sdk._updates import poll_update
        from sdk.client import WorkflowUpdateHandle, WorkflowUpdateStage

        status = await poll_update(client, workflow_id, run_id, update_id, WorkflowUpdateStage.ADMITTED, None)
        record = {key: status.get(key) for key in ("workflow_id", "run_id", "update_id", "stage")}
        outcome = status.get("outcome")
        if outcome is not None:
            pending = WorkflowUpdateHandle(client, update_id, workflow_id, known_outcome=outcome)
            try:
                record["result"] = await pending.result()
            except Exception as exc:  # a rejection or a failed handler: its failure
                record["failure"] = f"{type(exc.__cause__ or exc).__name__}: {exc.__cause__ or exc}"
        return record

    _show(ctx, run(ctx, call))
