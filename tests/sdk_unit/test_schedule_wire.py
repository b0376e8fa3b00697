"""The SDK's schedule types survive the trip to the wire and back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sdk import workflow
from sdk.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
)
from sdk.common import RetryPolicy
from sdk.converter import default_converter


@workflow.defn(name="NightlyReport")
class Nightly:
    @workflow.run
    async def run(self, region: str) -> str:
        return region


def test_schedule_round_trips_through_its_wire_shape() -> None:
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            Nightly.run,
            "eu",
            id="report",
            task_queue="reports",
            run_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_attempts=3),
            memo={"owner": "finance"},
        ),
        spec=ScheduleSpec(
            cron_expressions=["0 2 * * *"],
            intervals=[ScheduleIntervalSpec(every=timedelta(hours=1), offset=timedelta(minutes=15))],
            calendars=[ScheduleCalendarSpec(hour=[ScheduleRange(9)], day_of_week=[ScheduleRange(1, 5)])],
            start_at=datetime(2026, 1, 1, tzinfo=UTC),
            jitter=timedelta(seconds=30),
            time_zone_name="Europe/Paris",
        ),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.BUFFER_ALL, catchup_window=timedelta(hours=1)),
        state=ScheduleState(note="new", paused=True, limited_actions=True, remaining_actions=4),
    )
    wire = schedule.to_wire(default_converter)
    assert wire["action"]["workflow_type"] == "NightlyReport"
    assert wire["policy"]["overlap"] == "BUFFER_ALL"
    assert wire["spec"]["intervals"] == [{"every": 3600.0, "offset": 900.0}]
    back = Schedule.from_wire(wire, default_converter)
    assert back.action.workflow == "NightlyReport" and back.action.args == ["eu"]
    assert back.action.run_timeout == timedelta(minutes=5)
    assert back.action.memo == {"owner": "finance"}
    assert back.to_wire(default_converter) == wire
    assert back.spec.calendars[0].hour == (ScheduleRange(9),)
    assert back.spec.start_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert back.policy == schedule.policy
    assert back.state == schedule.state
