"""``chronicle schedule ...``: create, list, describe, update, pause, unpause, trigger,
backfill and delete schedules, with Temporal's CLI flags (``-s/--schedule-id``, ``--cron``,
``--interval``, ``--calendar``, ``--overlap-policy``, ``--notes``, ...).

Writes go through the SDK's ``Client.create_schedule`` and ``ScheduleHandle``; reads print
the server's description as it is (next action times, recent actions), payloads decoded.
``update`` changes only what its flags name (unlike Temporal's, which replaces the whole
schedule): ``--cron``/``--interval``/``--calendar`` together replace the times, each other
flag its one field; the write carries the description's conflict token.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import click

from sdk.cli.connection import common_options, options, run
from sdk.cli.history import decode_payloads
from sdk.cli.inputs import DURATION, TIMESTAMP, json_inputs, key_values, parse_json, upper_snake
from sdk.cli.output import Column, emit, format_record, format_rows

if TYPE_CHECKING:
    from sdk.client import Client, Schedule

F = TypeVar("F", bound=Callable[..., Any])

OVERLAP = ("Skip", "BufferOne", "BufferAll", "CancelOther", "TerminateOther", "AllowAll")
LIST_COLUMNS = [
    Column("Schedule ID", "schedule_id"),
    Column("Workflow Type", "workflow_type"),
    Column("Paused", "paused"),
    Column("Notes", "notes"),
    Column("Actions", "num_actions"),
    Column("Next Action", "next_action"),
]
SPEC_FLAGS = ("cron", "interval", "calendar")


@click.group(name="schedule")
def schedule() -> None:
    """Schedules that start workflows on a timetable.

    A cron expression, an interval or a calendar spec says when.
    """


def _schedule_id(command: F) -> F:
    return click.option("-s", "--schedule-id", required=True, help="Schedule id.")(command)


def _definition_options(command: F) -> F:
    """The flags that say what a schedule is (``create`` and ``update``)."""
    flags = [
        click.option("--cron", multiple=True, help="A cron expression (repeat for more)."),
        click.option("--interval", multiple=True, metavar="EVERY[/OFFSET]", help="E.g. 5m or 1h/15m."),
        click.option("--calendar", multiple=True, metavar="JSON", help="A ScheduleCalendarSpec as JSON."),
        click.option("--start-time", type=TIMESTAMP, help="No action before this time."),
        click.option("--end-time", type=TIMESTAMP, help="No action after this time."),
        click.option("--jitter", type=DURATION, help="Delay each action by up to this much."),
        click.option("--time-zone", help="Time zone of the cron and calendar specs (default UTC)."),
        click.option("--type", "workflow_type", help="Workflow type to start."),
        click.option("-t", "--task-queue", help="Task queue of the started workflows."),
        click.option("-w", "--workflow-id", help="Workflow id prefix of the started runs."),
        click.option("-i", "--input", "inputs", multiple=True, metavar="JSON", help="A JSON argument."),
        click.option("--execution-timeout", type=DURATION, help="Each started workflow's timeout."),
        click.option("--run-timeout", type=DURATION, help="Each started run's timeout."),
        click.option("--task-timeout", type=DURATION, help="Each workflow task's timeout."),
        click.option("--memo", multiple=True, metavar="KEY=JSON", help="Memo of the started workflows."),
        click.option(
            "--search-attribute", "search_attributes", multiple=True, metavar="KEY=JSON",
            help="Search attribute of the started workflows.",
        ),
        click.option("--overlap-policy", type=click.Choice(OVERLAP), help="If an action is due in a run."),
        click.option("--catchup-window", type=DURATION, help="How late a missed action may still run."),
        click.option("--pause-on-failure/--no-pause-on-failure", default=None, help="Pause if a run fails."),
        click.option("--paused/--unpaused", default=None, help="Create (or set) the schedule paused."),
        click.option("--notes", help="A note on the schedule's state."),
        click.option("--remaining-actions", type=click.IntRange(min=0), help="Stop after this many actions."),
    ]  # fmt: skip
    for flag in reversed(flags):
        command = flag(command)
    return command


def _intervals(values: tuple[str, ...]) -> list[Any]:
    from sdk.cli.inputs import duration
    from sdk.client import ScheduleIntervalSpec

    specs = []
    for value in values:
        every, _, offset = value.partition("/")
        specs.append(ScheduleIntervalSpec(every=duration(every), offset=duration(offset) if offset else None))
    return specs


def _apply(current: Schedule | None, p: dict[str, Any]) -> Schedule:
    """``current`` (None when creating) with what the flags ``p`` say."""
    from sdk.client import (
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleCalendarSpec,
        ScheduleOverlapPolicy,
        SchedulePolicy,
        ScheduleSpec,
        ScheduleState,
    )

    if current is None:
        needed = (("--type", "workflow_type"), ("-t", "task_queue"), ("-w", "workflow_id"))
        missing = [flag for flag, key in needed if not p[key]]
        if missing:
            raise click.UsageError(f"create needs {', '.join(missing)}: the workflow each action starts")
        if not any(p[key] for key in SPEC_FLAGS):
            raise click.UsageError("create needs --cron, --interval or --calendar: when it acts")
    spec = current.spec if current else ScheduleSpec()
    if any(p[key] for key in SPEC_FLAGS):
        spec.cron_expressions = list(p["cron"])
        spec.intervals = _intervals(p["interval"])
        spec.calendars = [ScheduleCalendarSpec.from_wire(parse_json(c, "--calendar")) for c in p["calendar"]]
    for key, flag in (("start_at", "start_time"), ("end_at", "end_time"), ("jitter", "jitter"),
                      ("time_zone_name", "time_zone")):  # fmt: skip
        if p[flag] is not None:
            setattr(spec, key, p[flag])
    old = current.action if current else None
    memo = key_values(p["memo"], "--memo")
    attributes = key_values(p["search_attributes"], "--search-attribute")
    action = ScheduleActionStartWorkflow(
        p["workflow_type"] or (old.workflow if old else ""),
        args=json_inputs(p["inputs"]) if p["inputs"] else (list(old.args) if old else []),
        id=p["workflow_id"] or (old.id if old else ""),
        task_queue=p["task_queue"] or (old.task_queue if old else ""),
        execution_timeout=_pick(p["execution_timeout"], old.execution_timeout if old else None),
        run_timeout=_pick(p["run_timeout"], old.run_timeout if old else None),
        task_timeout=_pick(p["task_timeout"], old.task_timeout if old else None),
        retry_policy=old.retry_policy if old else None,
        memo=memo or (old.memo if old else None),
        search_attributes=attributes or (old.search_attributes if old else None),
    )
    policy = current.policy if current else SchedulePolicy()
    if p["overlap_policy"]:
        policy.overlap = ScheduleOverlapPolicy[upper_snake(p["overlap_policy"])]
    if p["catchup_window"] is not None:
        policy.catchup_window = p["catchup_window"]
    if p["pause_on_failure"] is not None:
        policy.pause_on_failure = p["pause_on_failure"]
    state = current.state if current else ScheduleState()
    if p["paused"] is not None:
        state.paused = p["paused"]
    if p["notes"] is not None:
        state.note = p["notes"]
    if p["remaining_actions"] is not None:
        state.limited_actions, state.remaining_actions = p["remaining_actions"] > 0, p["remaining_actions"]
    return Schedule(action=action, spec=spec, policy=policy, state=state)


def _pick(value: timedelta | None, old: timedelta | None) -> timedelta | None:
    return value if value is not None else old


def _path(schedule_id: str, suffix: str = "") -> str:
    return f"/schedules/{quote(schedule_id, safe='')}{suffix}"


async def _describe(client: Client, schedule_id: str) -> dict[str, Any]:
    data = await client.transport.get(_path(schedule_id)) or {}
    described: dict[str, Any] = decode_payloads(data, client.data_converter)
    return described


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    """A schedule as ``list``'s table shows it."""
    definition, info = row.get("schedule") or {}, row.get("info") or {}
    state = definition.get("state") or {}
    upcoming = info.get("next_action_times") or []
    return {
        "schedule_id": row.get("schedule_id"),
        "workflow_type": (definition.get("action") or {}).get("workflow_type"),
        "paused": bool(state.get("paused")),
        "notes": state.get("note") or "",
        "num_actions": info.get("num_actions", 0),
        "next_action": upcoming[0] if upcoming else None,
    }


def readable(row: dict[str, Any]) -> dict[str, Any]:
    """A schedule's description as ``describe``'s table shows it: one field a line, the
    nested definition spread out (json and jsonl print the description as it is)."""
    if "schedule" not in row:
        return row  # not a description (delete's answer)
    definition, info = row.get("schedule") or {}, row.get("info") or {}
    spec, action = definition.get("spec") or {}, definition.get("action") or {}
    policy, state = definition.get("policy") or {}, definition.get("state") or {}
    intervals = [
        f"every {i.get('every')}s offset {i.get('offset') or 0}s" for i in spec.get("intervals") or []
    ]
    recent = info.get("recent_actions") or []
    return {
        "schedule_id": row.get("schedule_id"),
        "paused": bool(state.get("paused")),
        "notes": state.get("note") or "",
        "cron": ", ".join(spec.get("cron_expressions") or []),
        "intervals": ", ".join(intervals),
        "calendars": spec.get("calendars") or None,
        "time_zone": spec.get("time_zone_name"),
        "start_at": spec.get("start_at"),
        "end_at": spec.get("end_at"),
        "workflow_type": action.get("workflow_type"),
        "workflow_id": action.get("workflow_id"),
        "task_queue": action.get("task_queue"),
        "input": action.get("input"),
        "overlap_policy": policy.get("overlap"),
        "catchup_window": policy.get("catchup_window"),
        "pause_on_failure": policy.get("pause_on_failure"),
        "remaining_actions": state.get("remaining_actions") if state.get("limited_actions") else None,
        "num_actions": info.get("num_actions"),
        "running": [a.get("workflow_id") for a in info.get("running_actions") or []],
        "last_action": recent[-1] if recent else None,
        "next_actions": (info.get("next_action_times") or [])[:3],
        "memo": row.get("memo"),
    }


def _show(ctx: click.Context, client_call: Callable[[Client], Any]) -> None:
    """Run ``client_call`` (which writes, then describes), and print the schedule as it is now."""
    fmt = options(ctx).output
    described = run(ctx, client_call)
    emit(format_record(readable(described) if fmt == "table" else described, fmt))


@schedule.command()
@_schedule_id
@_definition_options
@click.option("--schedule-memo", multiple=True, metavar="KEY=JSON", help="Memo of the schedule itself.")
@common_options
@click.pass_context
def create(ctx: click.Context, /, schedule_id: str, schedule_memo: tuple[str, ...], **p: Any) -> None:
    """Create a schedule and print its description."""
    definition = _apply(None, p)
    memo = key_values(schedule_memo, "--schedule-memo")

    async def call(client: Client) -> dict[str, Any]:
        await client.create_schedule(schedule_id, definition, memo=memo)
        return await _describe(client, schedule_id)

    _show(ctx, call)


@schedule.command()
@_schedule_id
@_definition_options
@common_options
@click.pass_context
def update(ctx: click.Context, /, schedule_id: str, **p: Any) -> None:
    """Change what the given flags name; the rest of the schedule stays as it is."""
    from sdk.client import ScheduleUpdate, ScheduleUpdateInput

    def change(current: ScheduleUpdateInput) -> ScheduleUpdate:
        return ScheduleUpdate(schedule=_apply(current.description.schedule, p))

    async def call(client: Client) -> dict[str, Any]:
        await client.get_schedule_handle(schedule_id).update(change)
        return await _describe(client, schedule_id)

    _show(ctx, call)


@schedule.command(name="list")
@common_options
@click.pass_context
def list_(ctx: click.Context) -> None:
    """List the namespace's schedules in id order."""

    async def call(client: Client) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        cursor = ""
        while True:
            params = {"page_size": 1000, "cursor": cursor or None}
            page = await client.transport.get("/schedules", params=params) or {}
            rows += page.get("schedules") or []
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return rows

    rows = run(ctx, call)
    fmt = options(ctx).output
    emit(format_rows([_summary(r) for r in rows] if fmt == "table" else rows, LIST_COLUMNS, fmt))


@schedule.command()
@_schedule_id
@common_options
@click.pass_context
def describe(ctx: click.Context, schedule_id: str) -> None:
    """Show a schedule: its spec, action, policy, state and what it has done."""
    _show(ctx, lambda client: _describe(client, schedule_id))


def _pause_command(name: str, paused: bool) -> click.Command:
    @click.command(name=name, help=f"{name.capitalize()} a schedule, with a note saying why.")
    @_schedule_id
    @click.option("--reason", "--notes", "reason", default="", help="Why (kept as the schedule's note).")
    @common_options
    @click.pass_context
    def command(ctx: click.Context, schedule_id: str, reason: str) -> None:
        async def call(client: Client) -> dict[str, Any]:
            handle = client.get_schedule_handle(schedule_id)
            await (handle.pause(note=reason) if paused else handle.unpause(note=reason))
            return await _describe(client, schedule_id)

        _show(ctx, call)

    return command


schedule.add_command(_pause_command("pause", True))
schedule.add_command(_pause_command("unpause", False))


def _overlap(value: str | None) -> Any:
    from sdk.client import ScheduleOverlapPolicy

    return ScheduleOverlapPolicy[upper_snake(value)] if value else None


@schedule.command()
@_schedule_id
@click.option("--overlap-policy", type=click.Choice(OVERLAP), help="Overlap policy for this action only.")
@common_options
@click.pass_context
def trigger(ctx: click.Context, schedule_id: str, overlap_policy: str | None) -> None:
    """Take the schedule's action now."""

    async def call(client: Client) -> dict[str, Any]:
        await client.get_schedule_handle(schedule_id).trigger(overlap=_overlap(overlap_policy))
        return await _describe(client, schedule_id)

    _show(ctx, call)


@schedule.command()
@_schedule_id
@click.option("--start-time", type=TIMESTAMP, required=True, help="First time of the range.")
@click.option("--end-time", type=TIMESTAMP, required=True, help="End of the range (not included).")
@click.option("--overlap-policy", type=click.Choice(OVERLAP), help="Overlap policy for these actions.")
@common_options
@click.pass_context
def backfill(
    ctx: click.Context, schedule_id: str, start_time: Any, end_time: Any, overlap_policy: str | None
) -> None:
    """Take the action for every time the spec gives in a past range."""
    if end_time <= start_time:
        raise click.UsageError("--end-time must come after --start-time")

    async def call(client: Client) -> dict[str, Any]:
        from sdk.client import ScheduleBackfill

        item = ScheduleBackfill(start_at=start_time, end_at=end_time, overlap=_overlap(overlap_policy))
        await client.get_schedule_handle(schedule_id).backfill(item)
        return await _describe(client, schedule_id)

    _show(ctx, call)


@schedule.command()
@_schedule_id
@common_options
@click.pass_context
def delete(ctx: click.Context, schedule_id: str) -> None:
    """Delete a schedule (the workflows it started keep running)."""

    async def call(client: Client) -> dict[str, Any]:
        await client.get_schedule_handle(schedule_id).delete()
        return {"schedule_id": schedule_id, "deleted": True}

    _show(ctx, call)


COMMANDS = (schedule,)
