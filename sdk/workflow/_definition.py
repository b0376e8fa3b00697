"""The decorators that declare a workflow, and what ``@workflow.defn`` records for the worker.

The record is plain data on the class, so the worker and the replayer read it without this
module knowing anything about how workflows run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar, cast, overload

DEFINITION_ATTR = "__chronicle_workflow_definition__"
RUN_ATTR = "__chronicle_workflow_run__"
SIGNAL_ATTR = "__chronicle_workflow_signal__"
QUERY_ATTR = "__chronicle_workflow_query__"
UPDATE_ATTR = "__chronicle_workflow_update__"
VALIDATOR_ATTR = "__chronicle_update_validator__"
INIT_ATTR = "__chronicle_workflow_init__"
UNFINISHED_POLICY_ATTR = "__chronicle_unfinished_policy__"
# The name a dynamic handler is recorded under: it takes every name no other handler has.
DYNAMIC = "<dynamic>"

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    cls: type
    run_fn: Callable[..., Any]
    signals: dict[str, Callable[..., Any]] = field(default_factory=dict)
    queries: dict[str, Callable[..., Any]] = field(default_factory=dict)
    updates: dict[str, Callable[..., Any]] = field(default_factory=dict)
    init_takes_args: bool = False
    # Exceptions (besides FailureError) that fail the run rather than its workflow task.
    failure_exception_types: tuple[type[BaseException], ...] = ()
    dynamic: bool = False

    @staticmethod
    def from_class(cls: type) -> WorkflowDefinition:
        definition = getattr(cls, DEFINITION_ATTR, None)
        if not isinstance(definition, WorkflowDefinition) or definition.cls is not cls:
            raise TypeError(f"{cls.__qualname__} is not decorated with @workflow.defn")
        return definition

    @property
    def dynamic_signal(self) -> Callable[..., Any] | None:
        return self.signals.get(DYNAMIC)

    @property
    def dynamic_query(self) -> Callable[..., Any] | None:
        return self.queries.get(DYNAMIC)

    @staticmethod
    def build(
        cls: type,
        name: str | None,
        *,
        dynamic: bool = False,
        failure_exception_types: Sequence[type[BaseException]] = (),
    ) -> WorkflowDefinition:
        """Collect the decorated members of ``cls``; exactly one ``@workflow.run`` is required."""
        runs: list[Callable[..., Any]] = []
        signals: dict[str, Callable[..., Any]] = {}
        queries: dict[str, Callable[..., Any]] = {}
        updates: dict[str, Callable[..., Any]] = {}
        init_takes_args = False
        for attr in dir(cls):
            member: Any = getattr(cls, attr, None)
            if getattr(member, RUN_ATTR, False):
                runs.append(member)
            if (signal_name := getattr(member, SIGNAL_ATTR, None)) is not None:
                signals[signal_name] = member
            if (query_name := getattr(member, QUERY_ATTR, None)) is not None:
                queries[query_name] = member
            if (update_name := getattr(member, UPDATE_ATTR, None)) is not None:
                updates[update_name] = member
        if getattr(vars(cls).get("__init__"), INIT_ATTR, False):
            init_takes_args = True
        if len(runs) != 1:
            raise TypeError(f"{cls.__qualname__} needs exactly one @workflow.run method")
        if name and dynamic:
            raise ValueError("a workflow cannot have both a name and dynamic=True")
        return WorkflowDefinition(
            name=DYNAMIC if dynamic else name or cls.__name__,
            cls=cls,
            run_fn=runs[0],
            signals=signals,
            queries=queries,
            updates=updates,
            init_takes_args=init_takes_args,
            failure_exception_types=tuple(failure_exception_types),
            dynamic=dynamic,
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


def update_name(update: str | Callable[..., Any]) -> str:
    """The name an update is sent under: a string as is, else the name its handler was declared with."""
    return update if isinstance(update, str) else str(getattr(update, UPDATE_ATTR, None) or update.__name__)


def signal_name(signal: str | Callable[..., Any]) -> str:
    """The name a signal is sent under: a string as is, else the name its handler was declared with."""
    return signal if isinstance(signal, str) else str(getattr(signal, SIGNAL_ATTR, None) or signal.__name__)


# -- decorators ---------------------------------------------------------------------------------


@overload
def defn(cls: type[T]) -> type[T]: ...


@overload
def defn(
    *,
    name: str | None = None,
    sandboxed: bool = True,
    dynamic: bool = False,
    failure_exception_types: Sequence[type[BaseException]] = (),
    versioning_behavior: Any = None,
) -> Callable[[type[T]], type[T]]: ...


def defn(
    cls: type[T] | None = None,
    *,
    name: str | None = None,
    sandboxed: bool = True,
    dynamic: bool = False,
    failure_exception_types: Sequence[type[BaseException]] = (),
    versioning_behavior: Any = None,
) -> Any:
    """Mark a class as a workflow; ``name`` defaults to the class name.

    ``dynamic=True`` makes it the worker's workflow for every type no other workflow has; its
    run method takes ``(self, args: Sequence[RawValue])`` and ``workflow.info().workflow_type``
    says which type ran. An exception whose type is in ``failure_exception_types`` fails the
    run (as an ``ApplicationError`` does) instead of failing the workflow task to be retried.
    ``sandboxed`` and ``versioning_behavior`` are accepted for Temporal's signature: there is
    no sandbox (``sdk.worker.workflow_sandbox`` says what stands in for it).
    """

    def decorate(target: type[T]) -> type[T]:
        if DEFINITION_ATTR in vars(target):
            raise ValueError("Class already contains workflow definition")
        definition = WorkflowDefinition.build(
            target, name, dynamic=dynamic, failure_exception_types=failure_exception_types
        )
        setattr(target, DEFINITION_ATTR, definition)
        return target

    return decorate(cls) if cls is not None else decorate


def run(fn: F) -> F:
    setattr(fn, RUN_ATTR, True)
    return fn


def init(fn: F) -> F:
    """Mark ``__init__`` as taking the workflow's arguments."""
    setattr(fn, INIT_ATTR, True)
    return fn


def _named(attr: str, fn: F | None, name: str | None, dynamic: bool, **marks: Any) -> Any:
    if name and dynamic:
        raise ValueError("a handler cannot have both a name and dynamic=True")

    def decorate(target: F) -> F:
        setattr(target, attr, DYNAMIC if dynamic else name or target.__name__)
        for mark, value in marks.items():
            setattr(target, mark, value)
        return target

    return decorate(fn) if fn is not None else decorate


class HandlerUnfinishedPolicy(IntEnum):
    """What to do about a handler still running when the run completes (Temporal's names)."""

    WARN_AND_ABANDON = 1
    ABANDON = 2


class UnfinishedSignalHandlersWarning(RuntimeWarning):
    """The run completed while signal handlers were still running (their work was cut off)."""


class UnfinishedUpdateHandlersWarning(RuntimeWarning):
    """The run completed while update handlers were still running (their callers get a failure)."""


@overload
def signal(fn: F) -> F: ...


@overload
def signal(
    *,
    name: str | None = None,
    dynamic: bool = False,
    unfinished_policy: HandlerUnfinishedPolicy = HandlerUnfinishedPolicy.WARN_AND_ABANDON,
    description: str | None = None,
) -> Callable[[F], F]: ...


def signal(
    fn: F | None = None,
    *,
    name: str | None = None,
    dynamic: bool = False,
    unfinished_policy: HandlerUnfinishedPolicy = HandlerUnfinishedPolicy.WARN_AND_ABANDON,
    description: str | None = None,
) -> Any:
    """A signal handler (sync or async). ``dynamic=True`` takes every signal no other handler
    names, as ``(self, name: str, args: Sequence[RawValue])``. If the run completes while an
    async one is still running, a warning says so unless ``unfinished_policy`` is ABANDON."""
    return _named(SIGNAL_ATTR, fn, name, dynamic, **{UNFINISHED_POLICY_ATTR: unfinished_policy})


@overload
def query(fn: F) -> F: ...


@overload
def query(
    *, name: str | None = None, dynamic: bool = False, description: str | None = None
) -> Callable[[F], F]: ...


def query(
    fn: F | None = None, *, name: str | None = None, dynamic: bool = False, description: str | None = None
) -> Any:
    """A query handler (sync, read-only); ``dynamic=True`` as for ``signal``."""
    return _named(QUERY_ATTR, fn, name, dynamic)


@overload
def update(fn: F) -> F: ...


@overload
def update(
    *,
    name: str | None = None,
    dynamic: bool = False,
    unfinished_policy: HandlerUnfinishedPolicy = HandlerUnfinishedPolicy.WARN_AND_ABANDON,
    description: str | None = None,
) -> Callable[[F], F]: ...


def update(
    fn: F | None = None,
    *,
    name: str | None = None,
    dynamic: bool = False,
    unfinished_policy: HandlerUnfinishedPolicy = HandlerUnfinishedPolicy.WARN_AND_ABANDON,
    description: str | None = None,
) -> Any:
    """An update handler (sync or async): its return value goes back to the caller, and an
    ``ApplicationError`` it raises fails the update (not the run). Attach a validator with
    ``@my_update.validator``: it takes the same parameters, returns None, runs read-only before
    anything is written, and rejects the update by raising (a rejected update leaves no event).
    ``dynamic=True`` takes every update no other handler names, as ``(self, name, args)``."""

    def decorate(target: F) -> F:
        marked = _named(UPDATE_ATTR, target, name, dynamic, **{UNFINISHED_POLICY_ATTR: unfinished_policy})

        def validator(check: Callable[..., None]) -> Callable[..., None]:
            setattr(marked, VALIDATOR_ATTR, check)
            return check

        setattr(marked, "validator", validator)  # noqa: B010 (an attribute of a function)
        return cast(F, marked)

    return decorate(fn) if fn is not None else decorate
