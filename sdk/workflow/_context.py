"""What workflow code asks of its own run: time, waiting, determinism, versioning, memo and logging.

Each call goes to the engine through the installed ``_Runtime``, so it returns the same
values on every replay of the run.
"""

from __future__ import annotations

import asyncio
import logging
import uuid as _uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sdk._logging import ContextLoggerAdapter
from sdk.common import to_seconds
from sdk.converter import PayloadConverter
from sdk.search_attributes import SearchAttributesInput, search_attributes_to_wire
from sdk.workflow._interface import Info, _Runtime

T = TypeVar("T")


async def sleep(duration: timedelta | float) -> None:
    """A durable timer (StartTimer)."""
    await asyncio.sleep(to_seconds(duration) or 0)


async def wait_condition(fn: Callable[[], bool], *, timeout: timedelta | float | None = None) -> None:
    """Wait until ``fn()`` is true; raises asyncio.TimeoutError after ``timeout`` (a durable timer)."""
    waiter = _Runtime.current().workflow_wait_condition(fn)
    if timeout is None:
        await waiter
    else:
        await asyncio.wait_for(waiter, to_seconds(timeout))


def now() -> datetime:
    """The workflow's clock: the start time of the current workflow task."""
    return _Runtime.current().workflow_now()


def time() -> float:
    return _Runtime.current().workflow_time()


def time_ns() -> int:
    return int(_Runtime.current().workflow_time() * 1_000_000_000)


def in_workflow() -> bool:
    """True while workflow code runs (inside a workflow task)."""
    return _Runtime.maybe_current() is not None


def payload_converter() -> PayloadConverter:
    """The run's payload converter, e.g. to read a ``RawValue`` a dynamic handler received."""
    return _Runtime.current().workflow_data_converter().payload_converter


async def wait(
    fs: Iterable[Awaitable[T]],
    *,
    timeout: timedelta | float | None = None,
    return_when: str = asyncio.ALL_COMPLETED,
) -> tuple[list[asyncio.Task[T]], list[asyncio.Task[T]]]:
    """``asyncio.wait`` with a deterministic answer: ``(done, pending)`` as lists in the order
    the awaitables were given (asyncio's sets iterate in an order replay cannot promise)."""
    tasks = [asyncio.ensure_future(f) for f in fs]
    done, _ = await asyncio.wait(tasks, timeout=to_seconds(timeout), return_when=return_when)
    return [t for t in tasks if t in done], [t for t in tasks if t not in done]


def info() -> Info:
    return _Runtime.current().workflow_info()


def random() -> Any:
    """A random.Random seeded from the run, identical on every replay."""
    return _Runtime.current().workflow_random()


def uuid4() -> _uuid.UUID:
    return _uuid.UUID(int=random().getrandbits(128), version=4)


def patched(patch_id: str) -> bool:
    """True on new code paths (and on replays of runs that took them); records a marker."""
    return _Runtime.current().workflow_patched(patch_id)


def deprecate_patch(patch_id: str) -> None:
    _Runtime.current().workflow_patched(patch_id, deprecated=True)


def upsert_search_attributes(attributes: SearchAttributesInput) -> None:
    """Merge attributes into the run's: a list of ``SearchAttributeKey.value_set(v)`` /
    ``value_unset()`` updates, or the dict form ``{"Name": [value]}`` (an empty list removes)."""
    _Runtime.current().workflow_upsert_search_attributes(search_attributes_to_wire(attributes))


def memo() -> dict[str, Any]:
    return dict(_Runtime.current().workflow_info().memo)


_NO_DEFAULT: Any = object()


def memo_value(key: str, default: Any = _NO_DEFAULT, *, type_hint: Any = None) -> Any:
    """One memo value, decoded (as ``type_hint`` when given); KeyError without a default."""
    runtime = _Runtime.current()
    payload = runtime.workflow_info().memo.get(key)
    if payload is None:
        if default is _NO_DEFAULT:
            raise KeyError(f"memo has no key {key!r}")
        return default
    return runtime.workflow_data_converter().from_payload(payload, type_hint)


def as_completed(
    fs: Iterable[Awaitable[T]], *, timeout: timedelta | float | None = None
) -> Iterator[Awaitable[T]]:
    """``asyncio.as_completed`` with a deterministic order: of several that finish in the same
    pass of the loop, the one given first comes first."""
    pending = [asyncio.ensure_future(f) for f in fs]
    ready: list[asyncio.Future[T]] = []

    async def next_done() -> T:
        nonlocal pending
        if not ready:
            done, pending = await wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                raise TimeoutError()
            ready.extend(done)
        return await ready.pop(0)

    for _ in range(len(pending)):
        yield next_done()


def has_last_completion_result() -> bool:
    """True in a cron run (or its retry) after an earlier run of the chain completed with a result."""
    return _Runtime.current().workflow_has_last_completion_result()


def get_last_completion_result(type_hint: Any = None) -> Any:
    """The result of the chain's last completed cron run, or None."""
    return _Runtime.current().workflow_last_completion_result(type_hint)


def get_last_failure() -> BaseException | None:
    """The failure of the run before this one (a retried or failed cron run), or None."""
    return _Runtime.current().workflow_last_failure()


def _log_details() -> dict[str, Any] | None:
    runtime = _Runtime.maybe_current()
    if runtime is None:
        return None
    info = runtime.workflow_info()
    details: dict[str, Any] = {
        "attempt": info.attempt,
        "namespace": info.namespace,
        "run_id": info.run_id,
        "task_queue": info.task_queue,
        "workflow_id": info.workflow_id,
        "workflow_type": info.workflow_type,
    }
    update = runtime.workflow_current_update_info()
    if update is not None:  # inside an update's handler or validator, as Temporal's adapter adds
        details.update(update_id=update.id, update_name=update.name)
    return details


class LoggerAdapter(ContextLoggerAdapter):
    """Logs with the run's ids in ``extra["temporal_workflow"]`` and on the message, and stays
    silent while the run replays history it already logged (unless ``log_during_replay``)."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, "temporal_workflow", _log_details)
        self.log_during_replay = False

    # Temporal's names for the switches.
    workflow_info_on_message = ContextLoggerAdapter.info_on_message_switch()
    workflow_info_on_extra = ContextLoggerAdapter.info_on_extra_switch()

    def isEnabledFor(self, level: int) -> bool:
        runtime = _Runtime.maybe_current()
        if runtime is not None and runtime.workflow_is_replaying() and not self.log_during_replay:
            return False
        return super().isEnabledFor(level)


logger = LoggerAdapter(logging.getLogger("sdk.workflow"))
