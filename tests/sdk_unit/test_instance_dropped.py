"""An instance whose activation failed leaves no coroutine behind that never ran."""

from __future__ import annotations

import gc
import warnings

import pytest

from sdk import workflow
from tests.sdk_unit._history import HistoryBuilder, new_instance, payload


@workflow.defn(name="Picky")
class Picky:
    @workflow.signal
    def poke(self, value: int) -> None:
        raise RuntimeError(f"no poke of {value} accepted")

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: False)
        return "never"


def test_a_signal_handler_failing_in_the_first_task_leaves_no_unawaited_main() -> None:
    """The first task starts the run and delivers a signal before the run method's first
    step; the handler raises, the task fails, and the worker drops the instance. The run
    method's coroutine, created but never started, is closed with it, not left for the
    collector to warn about."""
    history = HistoryBuilder("Picky")
    history.add("WorkflowExecutionSignaled", signal_name="poke", input=[payload(7)])
    history.task()
    instance = new_instance(Picky)
    with pytest.raises(RuntimeError, match="no poke of 7"):
        instance.activate(history.events)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del instance
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
