"""Replay recorded histories against current workflow code to catch nondeterministic changes.

``WorkflowHistory`` is a run's history as typed events; ``Replayer`` runs workflow code over
it offline, as Temporal's does (``await replay_workflow``, ``await replay_workflows``,
``workflow_replay_iterator``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterable, AsyncIterator, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sdk._runtime.instance import WorkflowInstance
from sdk._runtime.temporal_history import chronicle_events, is_temporal_export
from sdk._worker_interceptor import Interceptor
from sdk.api.history.v1 import HistoryEvent, history_events
from sdk.common import RetryPolicy
from sdk.converter import DataConverter
from sdk.exceptions import NondeterminismError
from sdk.workflow import Info, ParentInfo
from sdk.workflow._definition import WorkflowDefinition


@dataclass
class WorkflowHistory:
    """A run's history: ``events`` are typed ``HistoryEvent``s (the server's JSON events, read as
    Temporal's messages); ``to_json`` writes the server's JSON and ``from_json`` reads it back,
    or a history exported from Temporal."""

    workflow_id: str
    events: list[HistoryEvent] = field(default_factory=list)
    run_id: str = ""

    def __post_init__(self) -> None:
        self.events = history_events(self.events)
        if not self.run_id and self.events and self.events[0]["event_type"] == "WorkflowExecutionStarted":
            self.run_id = str((self.events[0].get("attributes") or {}).get("original_execution_run_id") or "")

    @classmethod
    def from_json(
        cls,
        workflow_id_or_history: str | dict[str, Any] | list[Any],
        history: str | dict[str, Any] | list[Any] | None = None,
        *,
        workflow_id: str = "",
    ) -> WorkflowHistory:
        """Read a history: ``from_json(text)`` as Chronicle writes it, or Temporal's
        ``from_json(workflow_id, text)``. The text is the server's JSON (``to_json``, the
        run page's download, the history endpoint's answer) or Temporal's exported JSON
        (``temporal workflow show --output json``), converted to the server's shape."""
        if history is None:
            history = workflow_id_or_history
        else:
            workflow_id = str(workflow_id_or_history)
        value = json.loads(history) if isinstance(history, str) else history
        if is_temporal_export(value):
            return cls(workflow_id=workflow_id, events=history_events(chronicle_events(value)))
        if isinstance(value, list):
            value = {"events": value}
        return cls(
            workflow_id=str(value.get("workflow_id") or workflow_id),
            events=history_events(value.get("events") or (value.get("history") or {}).get("events") or []),
            run_id=str(value.get("run_id") or ""),
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "run_id": self.run_id,
            "events": [event.to_wire() for event in self.events],
        }

    def to_json(self) -> str:
        """The server's JSON (what ``from_json`` reads back)."""
        return json.dumps(self.to_json_dict())


@dataclass
class WorkflowReplayResult:
    """One history's replay (Temporal's name). Awaiting it gives it back, so both
    ``await replayer.replay_workflow(h)`` (Temporal) and ``replayer.replay_workflow(h)`` work."""

    history: WorkflowHistory
    replay_failure: Exception | None = None

    def __await__(self) -> Generator[Any, None, WorkflowReplayResult]:
        async def itself() -> WorkflowReplayResult:
            return self

        return itself().__await__()


@dataclass
class WorkflowReplayResults:
    """What ``replay_workflows`` found: the failures, by run id (the workflow id when a
    history has no run id)."""

    replay_failures: Mapping[str, Exception] = field(default_factory=dict)


def _seconds(value: Any) -> timedelta | None:
    return timedelta(seconds=float(value)) if value else None


def info_from_started_event(
    started: dict[str, Any], *, workflow_id: str, run_id: str, namespace: str = "default"
) -> Info:
    """The run's Info as its WorkflowExecutionStarted event describes it."""
    attrs = started.get("attributes") or {}
    return Info(
        workflow_id=workflow_id or str(attrs.get("workflow_id") or ""),
        run_id=run_id or str(attrs.get("original_execution_run_id") or ""),
        workflow_type=str((attrs.get("workflow_type") or {}).get("name") or ""),
        task_queue=str((attrs.get("task_queue") or {}).get("name") or ""),
        namespace=namespace,
        start_time=datetime.fromisoformat(started["event_time"]),
        attempt=int(attrs.get("attempt") or 1),
        run_timeout=_seconds(attrs.get("workflow_run_timeout")),
        execution_timeout=_seconds(attrs.get("workflow_execution_timeout")),
        task_timeout=_seconds(attrs.get("workflow_task_timeout")),
        continued_run_id=attrs.get("continued_execution_run_id"),
        first_execution_run_id=attrs.get("first_execution_run_id"),
        retry_policy=RetryPolicy.from_wire(attrs.get("retry_policy")),
        memo=dict(attrs.get("memo") or {}),
        search_attributes=dict(attrs.get("search_attributes") or {}),
        cron_schedule=str(attrs.get("cron_schedule") or ""),
        parent=_parent(attrs),
    )


def _parent(attrs: dict[str, Any]) -> ParentInfo | None:
    execution = attrs.get("parent_workflow_execution")
    if not isinstance(execution, dict):
        return None
    return ParentInfo(
        namespace=str(attrs.get("parent_workflow_namespace") or ""),
        run_id=str(execution.get("run_id") or ""),
        workflow_id=str(execution.get("workflow_id") or ""),
    )


Histories = Iterable[WorkflowHistory] | AsyncIterable[WorkflowHistory]
TEMPORAL_REPLAYER_OPTIONS = frozenset(
    {
        "workflow_task_executor", "workflow_runner", "unsandboxed_workflow_runner",
        "plugins", "build_id", "identity", "workflow_failure_exception_types", "debug_mode",
        "runtime", "disable_safe_workflow_eviction", "header_codec_behavior",
    }
)  # fmt: skip


class Replayer:
    """Replays whole histories against workflow code, offline; raises (or reports)
    ``NondeterminismError`` when the code would issue different commands, and
    ``WorkflowTaskError`` when it raises."""

    def __init__(
        self,
        *,
        workflows: Sequence[type],
        data_converter: DataConverter | None = None,
        namespace: str = "ReplayNamespace",
        interceptors: Sequence[Interceptor] = (),
        **temporal_options: Any,
    ) -> None:
        """``workflows``, ``data_converter`` and ``interceptors`` (their workflow interceptors
        run in each replay, as in a worker) as for a worker. Temporal's other options
        (runners, executor, build id, ...) are accepted and change nothing here:
        replay runs the code in-process, as every Chronicle workflow runs; a misspelt one is
        a ``TypeError``."""
        unknown = sorted(set(temporal_options) - TEMPORAL_REPLAYER_OPTIONS)
        if unknown:
            raise TypeError(f"Replayer() got unexpected keyword argument(s): {', '.join(unknown)}")
        self.definitions = {d.name: d for d in (WorkflowDefinition.from_class(cls) for cls in workflows)}
        self.converter = data_converter or DataConverter()
        self.namespace = namespace
        self.interceptors = list(interceptors)

    def replay_workflow(
        self, history: WorkflowHistory | dict[str, Any] | str, *, raise_on_replay_failure: bool = True
    ) -> WorkflowReplayResult:
        """Replay one history. The replay runs as this is called (the engine is in-process
        and never waits); the result is awaitable, as Temporal's coroutine is."""
        if not isinstance(history, WorkflowHistory):
            history = WorkflowHistory.from_json(history)
        try:
            self._replay(history)
        except Exception as exc:
            if raise_on_replay_failure:
                raise
            return WorkflowReplayResult(history, exc)
        return WorkflowReplayResult(history)

    def _replay(self, history: WorkflowHistory) -> None:
        events = [event.to_wire() for event in history.events]
        if not events or events[0]["event_type"] != "WorkflowExecutionStarted":
            raise ValueError("a history must begin with WorkflowExecutionStarted")
        info = info_from_started_event(
            events[0], workflow_id=history.workflow_id, run_id=history.run_id, namespace=self.namespace
        )
        definition = self.definitions.get(info.workflow_type)
        if definition is None:
            raise ValueError(f"Workflow type {info.workflow_type!r} is not registered on this replayer")
        instance = WorkflowInstance(definition, info, self.converter, interceptors=self.interceptors)
        activation = instance.activate(events)
        if activation.commands and _last_task_completed(events):
            raise NondeterminismError(
                f"workflow code issued {activation.commands[0]['command_type']} after the "
                "recorded history ended"
            )

    async def replay_workflows(
        self, histories: Histories, *, raise_on_replay_failure: bool = True
    ) -> WorkflowReplayResults:
        """Replay each history (a list, or an async iterator such as
        ``client.list_workflows(...).map_histories()``); the first failure raises, or with
        ``raise_on_replay_failure=False`` every failure is reported by run id."""
        failures: dict[str, Exception] = {}
        async with self.workflow_replay_iterator(histories) as results:
            async for result in results:
                if result.replay_failure is None:
                    continue
                if raise_on_replay_failure:
                    raise result.replay_failure
                failures[result.history.run_id or result.history.workflow_id] = result.replay_failure
        return WorkflowReplayResults(failures)

    @contextlib.asynccontextmanager
    async def workflow_replay_iterator(
        self, histories: Histories
    ) -> AsyncIterator[AsyncIterator[WorkflowReplayResult]]:
        """``async with replayer.workflow_replay_iterator(histories) as results:`` then
        ``async for result in results`` (each with ``replay_failure`` set, never raised)."""

        async def results() -> AsyncIterator[WorkflowReplayResult]:
            async for history in _each(histories):
                yield self.replay_workflow(history, raise_on_replay_failure=False)

        yield results()


async def _each(histories: Histories) -> AsyncIterator[WorkflowHistory]:
    if isinstance(histories, AsyncIterable):
        async for history in histories:
            yield history
    else:
        for history in histories:
            yield history


def _last_task_completed(events: list[dict[str, Any]]) -> bool:
    """True when the history's last workflow task recorded its completion (nothing is pending)."""
    for event in reversed(events):
        if event["event_type"] == "WorkflowTaskStarted":
            return False
        if event["event_type"] == "WorkflowTaskCompleted":
            return True
    return False
