"""The decorators that declare a workflow, and what ``@workflow.defn`` records for the worker.

The record is plain data on the class, so the worker and the replayer read it without this
module knowing anything about how workflows run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

DEFINITION_ATTR = "__chronicle_workflow_definition__"
RUN_ATTR = "__chronicle_workflow_run__"
SIGNAL_ATTR = "__chronicle_workflow_signal__"
QUERY_ATTR = "__chronicle_workflow_query__"
INIT_ATTR = "__chronicle_workflow_init__"

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    cls: type
    run_fn: Callable[..., Any]
    signals: dict[str, Callable[..., Any]] = field(default_factory=dict)
    queries: dict[str, Callable[..., Any]] = field(default_factory=dict)
    init_takes_args: bool = False

    @staticmethod
    def from_class(cls: type) -> WorkflowDefinition:
        definition = getattr(cls, DEFINITION_ATTR, None)
        if not isinstance(definition, WorkflowDefinition) or definition.cls is not cls:
            raise TypeError(f"{cls.__qualname__} is not decorated with @workflow.defn")
        return definition

    @staticmethod
    def build(cls: type, name: str | None) -> WorkflowDefinition:
        """Collect the decorated members of ``cls``; exactly one ``@workflow.run`` is required."""
        runs: list[Callable[..., Any]] = []
        signals: dict[str, Callable[..., Any]] = {}
        queries: dict[str, Callable[..., Any]] = {}
        init_takes_args = False
        for attr in dir(cls):
            member: Any = getattr(cls, attr, None)
            if getattr(member, RUN_ATTR, False):
                runs.append(member)
            if (signal_name := getattr(member, SIGNAL_ATTR, None)) is not None:
                signals[signal_name] = member
            if (query_name := getattr(member, QUERY_ATTR, None)) is not None:
                queries[query_name] = member
        if getattr(vars(cls).get("__init__"), INIT_ATTR, False):
            init_takes_args = True
        if len(runs) != 1:
            raise TypeError(f"{cls.__qualname__} needs exactly one @workflow.run method")
        return WorkflowDefinition(
            name=name or cls.__name__,
            cls=cls,
            run_fn=runs[0],
            signals=signals,
            queries=queries,
            init_takes_args=init_takes_args,
        )


def workflow_name(workflow: str | Callable[..., Any]) -> str:
    """A run method's workflow name (what ``@workflow.defn`` recorded) or a string as is."""
    if isinstance(workflow, str):
        return workflow
    owner = getattr(workflow, "__chronicle_workflow_name__", None)
    if isinstance(owner, str):
        return owner
    qualname = getattr(workflow, "__qualname__", "")
    cls_name = qualname.split(".")[0] if "." in qualname else qualname
    module = sys.modules.get(workflow.__module__)
    cls = getattr(module, cls_name, None)
    name = getattr(cls, "__chronicle_workflow_name__", None) or getattr(
        getattr(cls, "__chronicle_workflow_definition__", None), "name", None
    )
    return str(name or cls_name)


def signal_name(signal: str | Callable[..., Any]) -> str:
    """The name a signal is sent under: a string as is, else the name its handler was declared with."""
    return signal if isinstance(signal, str) else str(getattr(signal, SIGNAL_ATTR, None) or signal.__name__)


# -- decorators ---------------------------------------------------------------------------------


@overload
def defn(cls: type[T]) -> type[T]: ...


@overload
def defn(*, name: str | None = None) -> Callable[[type[T]], type[T]]: ...


def defn(cls: type[T] | None = None, *, name: str | None = None) -> Any:
    """Mark a class as a workflow; ``name`` defaults to the class name."""

    def decorate(target: type[T]) -> type[T]:
        setattr(target, DEFINITION_ATTR, WorkflowDefinition.build(target, name))
        return target

    return decorate(cls) if cls is not None else decorate


def run(fn: F) -> F:
    setattr(fn, RUN_ATTR, True)
    return fn


def init(fn: F) -> F:
    """Mark ``__init__`` as taking the workflow's arguments."""
    setattr(fn, INIT_ATTR, True)
    return fn


def _named(attr: str, fn: F | None, name: str | None) -> Any:
    def decorate(target: F) -> F:
        setattr(target, attr, name or target.__name__)
        return target

    return decorate(fn) if fn is not None else decorate


@overload
def signal(fn: F) -> F: ...


@overload
def signal(*, name: str | None = None) -> Callable[[F], F]: ...


def signal(fn: F | None = None, *, name: str | None = None) -> Any:
    return _named(SIGNAL_ATTR, fn, name)


@overload
def query(fn: F) -> F: ...


@overload
def query(*, name: str | None = None) -> Callable[[F], F]: ...


def query(fn: F | None = None, *, name: str | None = None) -> Any:
    return _named(QUERY_ATTR, fn, name)
