"""Schedules: start a workflow on a cron, interval or calendar spec, server-side.

Names and parameters follow Temporal's Python client (``temporalio.client``):
``Client.create_schedule(id, Schedule(action=ScheduleActionStartWorkflow(...),
spec=ScheduleSpec(...)))`` returns a :class:`ScheduleHandle` with ``describe``,
``pause``, ``unpause``, ``trigger``, ``backfill``, ``update`` and ``delete``.
These names are re-exported from ``sdk.client``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from typing import Any
from urllib.parse import quote

from sdk._http import ServerClient
from sdk.common import RetryPolicy
from sdk.converter import DataConverter
from sdk.workflow._definition import workflow_name


class ScheduleOverlapPolicy(IntEnum):
    """What to do when an action is due while the previous one still runs."""

    SKIP = 1
    BUFFER_ONE = 2
    BUFFER_ALL = 3
    CANCEL_OTHER = 4
    TERMINATE_OTHER = 5
    ALLOW_ALL = 6


@dataclass(frozen=True)
class ScheduleRange:
    """Values ``start`` to ``end`` (inclusive; ``end`` 0 means just ``start``) every ``step``."""

    start: int
    end: int = 0
    step: int = 0

    def to_wire(self) -> dict[str, int]:
        return {"start": self.start, "end": self.end, "step": self.step}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ScheduleRange:
        return cls(int(data["start"]), int(data.get("end") or 0), int(data.get("step") or 0))


_CALENDAR_FIELDS = ("second", "minute", "hour", "day_of_month", "month", "year", "day_of_week")


@dataclass
class ScheduleCalendarSpec:
    """A calendar time pattern; the defaults mean midnight every day, as in Temporal."""

    second: Sequence[ScheduleRange] = (ScheduleRange(0),)
    minute: Sequence[ScheduleRange] = (ScheduleRange(0),)
    hour: Sequence[ScheduleRange] = (ScheduleRange(0),)
    day_of_month: Sequence[ScheduleRange] = (ScheduleRange(1, 31),)
    month: Sequence[ScheduleRange] = (ScheduleRange(1, 12),)
    year: Sequence[ScheduleRange] = ()
    day_of_week: Sequence[ScheduleRange] = (ScheduleRange(0, 6),)
    comment: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {name: [r.to_wire() for r in getattr(self, name)] for name in _CALENDAR_FIELDS}
        if self.comment:
            wire["comment"] = self.comment
        return wire

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ScheduleCalendarSpec:
        ranges = {
            name: tuple(ScheduleRange.from_wire(r) for r in data[name])
            for name in _CALENDAR_FIELDS
            if name in data
        }
        return cls(**ranges, comment=data.get("comment"))


@dataclass
class ScheduleIntervalSpec:
    """Every ``every`` since the Unix epoch, shifted by ``offset``."""

    every: timedelta
    offset: timedelta | None = None


@dataclass
class ScheduleSpec:
    """When to act: the union of calendars, intervals and cron expressions."""

    calendars: Sequence[ScheduleCalendarSpec] = ()
    intervals: Sequence[ScheduleIntervalSpec] = ()
    cron_expressions: Sequence[str] = ()
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter: timedelta | None = None
    time_zone_name: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "calendars": [c.to_wire() for c in self.calendars],
            "intervals": [
                {"every": i.every.total_seconds(), "offset": (i.offset or timedelta(0)).total_seconds()}
                for i in self.intervals
            ],
            "cron_expressions": list(self.cron_expressions),
            "start_at": _wire_time(self.start_at),
            "end_at": _wire_time(self.end_at),
            "jitter": self.jitter.total_seconds() if self.jitter else 0,
            "time_zone_name": self.time_zone_name or "UTC",
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ScheduleSpec:
        return cls(
            calendars=tuple(ScheduleCalendarSpec.from_wire(c) for c in data.get("calendars") or []),
            intervals=tuple(
                ScheduleIntervalSpec(timedelta(seconds=i["every"]), timedelta(seconds=i.get("offset") or 0))
                for i in data.get("intervals") or []
            ),
            cron_expressions=tuple(data.get("cron_expressions") or []),
            start_at=_time(data.get("start_at")),
            end_at=_time(data.get("end_at")),
            jitter=timedelta(seconds=data["jitter"]) if data.get("jitter") else None,
            time_zone_name=data.get("time_zone_name"),
        )


class ScheduleActionStartWorkflow:
    """Start a workflow each time the schedule acts.

    The started run's workflow id is ``id`` plus ``-<scheduled time>``, so each action
    is a separate workflow id, as in Temporal.
    """

    def __init__(
        self,
        workflow: str | Callable[..., Any],
        arg: Any = None,
        *,
        args: Sequence[Any] = (),
        id: str,
        task_queue: str,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        task_timeout: timedelta | None = None,
        retry_policy: RetryPolicy | None = None,
        memo: dict[str, Any] | None = None,
        search_attributes: dict[str, Any] | None = None,
    ) -> None:
        self.workflow = workflow_name(workflow)
        self.args: Sequence[Any] = list(args) if args else ([] if arg is None else [arg])
        self.id = id
        self.task_queue = task_queue
        self.execution_timeout = execution_timeout
        self.run_timeout = run_timeout
        self.task_timeout = task_timeout
        self.retry_policy = retry_policy
        self.memo = memo
        self.search_attributes = search_attributes

    def to_wire(self, converter: DataConverter) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "workflow_type": self.workflow,
            "workflow_id": self.id,
            "task_queue": self.task_queue,
            "input": converter.to_payloads(list(self.args)),
            "memo": {k: converter.to_payload(v) for k, v in (self.memo or {}).items()},
            "search_attributes": dict(self.search_attributes or {}),
            "retry_policy": self.retry_policy.to_wire() if self.retry_policy else None,
        }
        for key in ("execution_timeout", "run_timeout", "task_timeout"):
            value: timedelta | None = getattr(self, key)
            if value is not None:
                wire[key] = value.total_seconds()
        return wire

    @classmethod
    def from_wire(cls, data: dict[str, Any], converter: DataConverter) -> ScheduleActionStartWorkflow:
        def seconds(key: str) -> timedelta | None:
            return timedelta(seconds=data[key]) if data.get(key) else None

        return cls(
            data["workflow_type"],
            args=converter.from_payloads(data.get("input") or []),
            id=data["workflow_id"],
            task_queue=data["task_queue"],
            execution_timeout=seconds("execution_timeout"),
            run_timeout=seconds("run_timeout"),
            task_timeout=seconds("task_timeout"),
            retry_policy=RetryPolicy.from_wire(data.get("retry_policy")),
            memo={k: converter.from_payload(v) for k, v in (data.get("memo") or {}).items()},
            search_attributes=dict(data.get("search_attributes") or {}),
        )


@dataclass
class SchedulePolicy:
    overlap: ScheduleOverlapPolicy = ScheduleOverlapPolicy.SKIP
    catchup_window: timedelta = timedelta(days=365)
    pause_on_failure: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {
            "overlap": self.overlap.name,
            "catchup_window": self.catchup_window.total_seconds(),
            "pause_on_failure": self.pause_on_failure,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SchedulePolicy:
        return cls(
            overlap=ScheduleOverlapPolicy[data.get("overlap") or "SKIP"],
            catchup_window=timedelta(seconds=data.get("catchup_window") or 365 * 86400),
            pause_on_failure=bool(data.get("pause_on_failure")),
        )


@dataclass
class ScheduleState:
    note: str | None = None
    paused: bool = False
    limited_actions: bool = False
    remaining_actions: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {
            "note": self.note or "",
            "paused": self.paused,
            "limited_actions": self.limited_actions,
            "remaining_actions": self.remaining_actions,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ScheduleState:
        return cls(
            note=data.get("note") or None,
            paused=bool(data.get("paused")),
            limited_actions=bool(data.get("limited_actions")),
            remaining_actions=int(data.get("remaining_actions") or 0),
        )


@dataclass
class Schedule:
    action: ScheduleActionStartWorkflow
    spec: ScheduleSpec
    policy: SchedulePolicy = field(default_factory=SchedulePolicy)
    state: ScheduleState = field(default_factory=ScheduleState)

    def to_wire(self, converter: DataConverter) -> dict[str, Any]:
        return {
            "action": self.action.to_wire(converter),
            "spec": self.spec.to_wire(),
            "policy": self.policy.to_wire(),
            "state": self.state.to_wire(),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any], converter: DataConverter) -> Schedule:
        return cls(
            action=ScheduleActionStartWorkflow.from_wire(data["action"], converter),
            spec=ScheduleSpec.from_wire(data["spec"]),
            policy=SchedulePolicy.from_wire(data.get("policy") or {}),
            state=ScheduleState.from_wire(data.get("state") or {}),
        )


@dataclass(frozen=True)
class ScheduleBackfill:
    """Act for every spec time in [start_at, end_at), whatever the catch-up window."""

    start_at: datetime
    end_at: datetime
    overlap: ScheduleOverlapPolicy | None = None


@dataclass(frozen=True)
class ScheduleActionExecutionStartWorkflow:
    workflow_id: str
    first_execution_run_id: str


@dataclass(frozen=True)
class ScheduleActionResult:
    scheduled_at: datetime
    started_at: datetime
    action: ScheduleActionExecutionStartWorkflow


@dataclass(frozen=True)
class ScheduleInfo:
    num_actions: int
    num_actions_missed_catchup_window: int
    num_actions_skipped_overlap: int
    running_actions: Sequence[ScheduleActionExecutionStartWorkflow]
    recent_actions: Sequence[ScheduleActionResult]
    next_action_times: Sequence[datetime]
    created_at: datetime
    last_updated_at: datetime | None

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ScheduleInfo:
        def execution(a: dict[str, Any]) -> ScheduleActionExecutionStartWorkflow:
            return ScheduleActionExecutionStartWorkflow(a["workflow_id"], a["run_id"])

        return cls(
            num_actions=int(data["num_actions"]),
            num_actions_missed_catchup_window=int(data["num_actions_missed_catchup_window"]),
            num_actions_skipped_overlap=int(data["num_actions_skipped_overlap"]),
            running_actions=[execution(a) for a in data.get("running_actions") or []],
            recent_actions=[
                ScheduleActionResult(
                    datetime.fromisoformat(a["schedule_time"]),
                    datetime.fromisoformat(a["actual_time"]),
                    execution(a),
                )
                for a in data.get("recent_actions") or []
            ],
            next_action_times=[datetime.fromisoformat(t) for t in data.get("next_action_times") or []],
            created_at=datetime.fromisoformat(data["created_at"]),
            last_updated_at=_time(data.get("last_updated_at")),
        )


@dataclass(frozen=True)
class ScheduleDescription:
    id: str
    schedule: Schedule
    info: ScheduleInfo
    memo: dict[str, Any]
    conflict_token: int

    @classmethod
    def from_wire(cls, data: dict[str, Any], converter: DataConverter) -> ScheduleDescription:
        return cls(
            id=data["schedule_id"],
            schedule=Schedule.from_wire(data["schedule"], converter),
            info=ScheduleInfo.from_wire(data["info"]),
            memo={k: converter.from_payload(v) for k, v in (data.get("memo") or {}).items()},
            conflict_token=int(data.get("conflict_token") or 0),
        )


# Temporal's list iterator yields a lighter description; ours carries the whole one.
ScheduleListDescription = ScheduleDescription


@dataclass(frozen=True)
class ScheduleUpdateInput:
    description: ScheduleDescription


@dataclass(frozen=True)
class ScheduleUpdate:
    schedule: Schedule


ScheduleUpdater = Callable[[ScheduleUpdateInput], ScheduleUpdate | None | Awaitable[ScheduleUpdate | None]]


class ScheduleHandle:
    """A handle on one schedule by id."""

    def __init__(self, client: ServerClient, id: str) -> None:
        self.client = client
        self.id = id

    def _path(self, suffix: str = "") -> str:
        return f"/schedules/{quote(self.id, safe='')}{suffix}"

    async def describe(self) -> ScheduleDescription:
        data = await self.client.transport.get(self._path()) or {}
        return ScheduleDescription.from_wire(data, self.client.data_converter)

    async def pause(self, *, note: str | None = None) -> None:
        await self.client.transport.post(self._path("/pause"), {"note": note or ""})

    async def unpause(self, *, note: str | None = None) -> None:
        await self.client.transport.post(self._path("/unpause"), {"note": note or ""})

    async def trigger(self, *, overlap: ScheduleOverlapPolicy | None = None) -> None:
        await self.client.transport.post(
            self._path("/trigger"), {"overlap": overlap.name if overlap else ""}, idempotent=False
        )

    async def backfill(self, *backfill: ScheduleBackfill) -> None:
        if not backfill:
            raise ValueError("at least one backfill required")
        body = {
            "backfills": [
                {
                    "start_at": _wire_time(b.start_at),
                    "end_at": _wire_time(b.end_at),
                    "overlap": b.overlap.name if b.overlap else "",
                }
                for b in backfill
            ]
        }
        await self.client.transport.post(self._path("/backfill"), body, idempotent=False)

    async def update(self, updater: ScheduleUpdater) -> None:
        """Describe, let ``updater`` return the new schedule (or None to keep it), write it.

        The write carries the description's conflict token, so an update that raced
        another is refused instead of silently undoing it.
        """
        description = await self.describe()
        outcome = updater(ScheduleUpdateInput(description))
        update = await outcome if inspect.isawaitable(outcome) else outcome
        if update is None:
            return
        await self.client.transport.post(
            self._path("/update"),
            {
                "schedule": update.schedule.to_wire(self.client.data_converter),
                "conflict_token": description.conflict_token,
            },
        )

    async def delete(self) -> None:
        await self.client.transport.request("DELETE", self._path())


async def create_schedule(
    client: ServerClient,
    id: str,
    schedule: Schedule,
    *,
    trigger_immediately: bool = False,
    backfill: Sequence[ScheduleBackfill] = (),
    memo: dict[str, Any] | None = None,
) -> ScheduleHandle:
    converter = client.data_converter
    body = {
        "schedule_id": id,
        "schedule": schedule.to_wire(converter),
        "memo": {k: converter.to_payload(v) for k, v in (memo or {}).items()},
    }
    await client.transport.post("/schedules", body, idempotent=False)
    handle = ScheduleHandle(client, id)
    if trigger_immediately:
        await handle.trigger()
    if backfill:
        await handle.backfill(*backfill)
    return handle


async def list_schedules(
    client: ServerClient, *, page_size: int = 1000
) -> AsyncIterator[ScheduleListDescription]:
    cursor = ""
    while True:
        page = (
            await client.transport.get(
                "/schedules", params={"page_size": page_size, "cursor": cursor or None}
            )
            or {}
        )
        for row in page.get("schedules") or []:
            yield ScheduleDescription.from_wire(row, client.data_converter)
        cursor = page.get("next_cursor") or ""
        if not cursor:
            return


def _wire_time(value: datetime | None) -> str | None:
    return None if value is None else (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


__all__ = [
    "Schedule",
    "ScheduleActionExecutionStartWorkflow",
    "ScheduleActionResult",
    "ScheduleActionStartWorkflow",
    "ScheduleBackfill",
    "ScheduleCalendarSpec",
    "ScheduleDescription",
    "ScheduleHandle",
    "ScheduleInfo",
    "ScheduleIntervalSpec",
    "ScheduleListDescription",
    "ScheduleOverlapPolicy",
    "SchedulePolicy",
    "ScheduleRange",
    "ScheduleSpec",
    "ScheduleState",
    "ScheduleUpdate",
    "ScheduleUpdateInput",
]
