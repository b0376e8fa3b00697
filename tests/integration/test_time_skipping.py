"""The skipped clock and when a time-skipping stack jumps it, on the real PostgreSQL.

The jump decision looks at the whole stack (every task, timer and activity row), so each
test starts from an empty one: rows other tests committed are deleted inside this test's
transaction and come back at its rollback.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from chronicle import clock
from history import kernel, time_skipping
from history.kernel.timers import ShardFence, fire_timers
from history.models import HistoryEvent, Schedule, Shard, TimerKind, TimerTask, WorkflowExecution
from matching.dispatch import poll_once
from tests.factories import ExecutionFactory, scope_of

pytestmark = pytest.mark.django_db

THIRTY_DAYS = timedelta(days=30)


@pytest.fixture
def skipping() -> Iterator[None]:
    """This process keeps the skipped clock, on a stack with no runs or schedules."""
    WorkflowExecution.objects.all().delete()
    Schedule.objects.all().delete()
    TimerTask.objects.all().delete()
    clock.set_time_skipping(True)
    try:
        yield
    finally:
        clock.set_time_skipping(False)


def _complete(run: WorkflowExecution, task: dict[str, Any], command_type: str, **attributes: Any) -> None:
    command = {"command_type": command_type, "attributes": attributes}
    kernel.respond_workflow_task_completed(
        scope=scope_of(task), task_token=task["task_token"], commands=[command]
    )


def _sleeping_run(seconds: float) -> WorkflowExecution:
    run = ExecutionFactory()
    task = poll_once(run.namespace, run.task_queue, "workflow", "w1")
    assert task is not None
    _complete(run, task, "StartTimer", timer_id="nap", start_to_fire_timeout=seconds)
    return run


def _user_timer(run: WorkflowExecution) -> TimerTask:
    return TimerTask.objects.get(run_id=run.run_id, kind=TimerKind.USER_TIMER)


def _fired(run: WorkflowExecution) -> HistoryEvent | None:
    return HistoryEvent.objects.filter(run_id=run.run_id, event_type="TimerFired").first()


def _turns_until_fired(run: WorkflowExecution, turns: int = 5) -> HistoryEvent:
    """Turn as the shard owner's loop does, fire what is due, then jump if idle, until the
    run's timer fired. A started workflow task leaves its timeout timer behind, a no-op
    when it fires: the first jump may land on it."""
    for _ in range(turns):
        due = list(TimerTask.objects.filter(fire_at__lte=clock.now()).values_list("id", "run_id", "shard_id"))
        shards = sorted({shard for _, _, shard in due})
        for shard in shards:
            Shard.objects.update_or_create(shard_id=shard, defaults={"range_id": 1})
        if due:
            fire_timers([ShardFence(s, 1) for s in shards], [(tid, str(r)) for tid, r, _ in due])
        event = _fired(run)
        if event is not None:
            return event
        assert time_skipping.skip_if_idle(), "an idle stack with a timer ahead jumps"
    raise AssertionError(f"the timer did not fire in {turns} turns")


def test_a_deployment_keeps_real_time_and_reads_no_row(django_assert_num_queries: Any) -> None:
    assert not clock.time_skipping()
    assert clock.now is timezone.now
    with django_assert_num_queries(0):
        before = timezone.now()
        assert before <= clock.now() <= timezone.now()


def test_the_skipped_clock_moves_only_forward(skipping: None) -> None:
    assert abs(clock.now() - timezone.now()) < timedelta(seconds=5), "nothing skipped yet"

    clock.skip_by(THIRTY_DAYS)
    assert clock.offset() >= THIRTY_DAYS
    assert clock.now() - timezone.now() >= THIRTY_DAYS - timedelta(seconds=1)

    clock.skip_to(timezone.now() + timedelta(days=1))
    assert clock.offset() >= THIRTY_DAYS, "a target already passed leaves the clock as it is"
    with pytest.raises(ValueError):
        clock.skip_by(timedelta(seconds=-1))

    clock.skip_to(timezone.now() + timedelta(days=40))
    assert clock.offset() >= timedelta(days=40) - timedelta(seconds=1)


def test_an_idle_stack_jumps_to_its_next_timer_and_the_timer_fires_in_skipped_time(skipping: None) -> None:
    run = ExecutionFactory()
    assert not time_skipping.skip_if_idle(), "a workflow task waits for a worker"
    task = poll_once(run.namespace, run.task_queue, "workflow", "w1")
    assert task is not None
    assert not time_skipping.skip_if_idle(), "a worker holds a started workflow task"
    _complete(run, task, "StartTimer", timer_id="nap", start_to_fire_timeout=THIRTY_DAYS.total_seconds())
    timer = _user_timer(run)

    fired = _turns_until_fired(run)

    assert clock.now() >= timer.fire_at
    assert clock.offset() >= THIRTY_DAYS - timedelta(seconds=5)
    assert fired.event_time - run.start_time >= THIRTY_DAYS
    assert not time_skipping.skip_if_idle(), "the timer's workflow task waits for a worker"
    woken = poll_once(run.namespace, run.task_queue, "workflow", "w1")
    assert woken is not None, "the task is visible in skipped time"


def test_a_hold_stops_the_jump_until_it_is_released(skipping: None) -> None:
    _sleeping_run(3600)
    assert time_skipping.hold() == 1
    assert time_skipping.hold() == 2
    assert not time_skipping.skip_if_idle()
    assert time_skipping.release() == 1
    assert not time_skipping.skip_if_idle(), "holds nest"
    assert time_skipping.release() == 0
    assert time_skipping.release() == 0, "never below zero"

    assert time_skipping.skip_if_idle()


def test_a_closed_runs_retention_is_not_a_target(skipping: None) -> None:
    run = ExecutionFactory()
    task = poll_once(run.namespace, run.task_queue, "workflow", "w1")
    assert task is not None
    _complete(run, task, "CompleteWorkflowExecution", result=None)
    assert TimerTask.objects.filter(run_id=run.run_id, kind=TimerKind.RETENTION).exists()

    assert time_skipping.next_due() is None
    assert not time_skipping.skip_if_idle()
    assert clock.offset() == timedelta(0)


def test_the_jumps_stop_at_the_earliest_timer(skipping: None) -> None:
    later = _sleeping_run(7200)
    sooner = _sleeping_run(60)

    _turns_until_fired(sooner)

    assert _user_timer(later).fire_at > clock.now() >= sooner.start_time + timedelta(seconds=60)
    assert _fired(later) is None
    assert time_skipping.next_due() is not None


def test_a_deployment_routes_no_clock_controls(client: Any) -> None:
    """The frontend routes ``time-skipping`` only with ``CHRONICLE_TIME_SKIPPING`` on."""
    assert client.get("/api/v1/namespaces/default/time-skipping").status_code == 404
    assert client.post("/api/v1/namespaces/default/time-skipping/sleep", {"seconds": 1}).status_code == 404
