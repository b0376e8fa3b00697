"""What ``@workflow.defn`` records about a workflow class, read back by the worker and runtime."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DEFINITION_ATTR = "__chronicle_workflow_definition__"
RUN_ATTR = "__chronicle_workflow_run__"
SIGNAL_ATTR = "__chronicle_workflow_signal__"
QUERY_ATTR = "__chronicle_workflow_query__"
INIT_ATTR = "__chronicle_workflow_init__"


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
