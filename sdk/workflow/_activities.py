"""Activities from workflow code: schedule them on a task queue, or run short ones in the worker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sdk.common import RetryPolicy, to_seconds
from sdk.converter import return_hint
from sdk.workflow._interface import ActivityCancellationType, _Runtime


def _activity_name(activity: Any) -> str:
    if isinstance(activity, str):
        return activity
    name = getattr(activity, "__chronicle_activity_name__", None)
    if name is None and not hasattr(activity, "__name__"):  # a callable class instance
        name = getattr(type(activity).__call__, "__chronicle_activity_name__", type(activity).__name__)
    return str(name or activity.__name__)


def start_activity(
    activity: Any,
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    task_queue: str | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
    activity_id: str | None = None,
    result_type: Any = None,
) -> asyncio.Task[Any]:
    """Schedule an activity now (ScheduleActivityTask); the task resolves to its result."""
    if schedule_to_close_timeout is None and start_to_close_timeout is None:
        raise ValueError("schedule_to_close_timeout or start_to_close_timeout is required")
    runtime = _Runtime.current()
    options: dict[str, Any] = {
        "activity_id": activity_id,
        "task_queue": task_queue,
        "schedule_to_close_timeout": to_seconds(schedule_to_close_timeout),
        "schedule_to_start_timeout": to_seconds(schedule_to_start_timeout),
        "start_to_close_timeout": to_seconds(start_to_close_timeout),
        "heartbeat_timeout": to_seconds(heartbeat_timeout),
        "retry_policy": retry_policy.to_wire() if retry_policy else None,
    }
    hint = result_type if result_type is not None or isinstance(activity, str) else return_hint(activity)
    values = list(args) if args else ([] if arg is None else [arg])
    return runtime.workflow_start_activity(_activity_name(activity), values, options, hint, cancellation_type)


async def execute_activity(activity: Any, arg: Any = None, **options: Any) -> Any:
    """Schedule an activity and wait for its result (raises ActivityError on failure)."""
    return await start_activity(activity, arg, **options)


async def execute_local_activity(
    activity: Any,
    arg: Any = None,
    *,
    args: Sequence[Any] = (),
    schedule_to_close_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    result_type: Any = None,
) -> Any:
    """Run a short activity inside the worker; its outcome is recorded as a marker."""
    if schedule_to_close_timeout is None and start_to_close_timeout is None:
        raise ValueError("schedule_to_close_timeout or start_to_close_timeout is required")
    options = {
        "schedule_to_close_timeout": to_seconds(schedule_to_close_timeout),
        "start_to_close_timeout": to_seconds(start_to_close_timeout),
        "retry_policy": retry_policy.to_wire() if retry_policy else None,
    }
    hint = result_type if result_type is not None or isinstance(activity, str) else return_hint(activity)
    values = list(args) if args else ([] if arg is None else [arg])
    runtime = _Runtime.current()
    return await runtime.workflow_start_local_activity(_activity_name(activity), values, options, hint)


def start_local_activity(activity: Any, arg: Any = None, **options: Any) -> asyncio.Task[Any]:
    # The activity is started when the task first runs, not now: replays of recorded
    # histories depend on that order.
    return _Runtime.current().workflow_create_task(execute_local_activity(activity, arg, **options))


# Temporal's spellings for activities that are methods (the workflow passes ``MyClass.method``;
# the worker registers ``instance.method``) or callable class instances: the activity is
# named by its decorator either way, so they are the functions above.
start_activity_method = start_activity
execute_activity_method = execute_activity
start_local_activity_method = start_local_activity
execute_local_activity_method = execute_local_activity
start_activity_class = start_activity
execute_activity_class = execute_activity
start_local_activity_class = start_local_activity
execute_local_activity_class = execute_local_activity
