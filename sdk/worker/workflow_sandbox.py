"""Temporal's ``worker.workflow_sandbox`` names, for code that configures the sandbox.

Chronicle runs workflow code without a sandbox: nothing is re-imported per run and no module
is proxied. ``UnsandboxedWorkflowRunner`` (the default) says so; ``SandboxedWorkflowRunner``
and ``SandboxRestrictions`` are accepted so ported workers construct unchanged, and run
workflows exactly as the unsandboxed runner does. What stands in for the sandbox is the
determinism guard (``sdk.workflow._guard``): while a workflow task runs, wall clocks,
randomness and blocking I/O called from workflow code raise ``RestrictedWorkflowAccessError``.
It is on by default; ``Worker(..., determinism_guard=False)`` turns it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from sdk.exceptions import RestrictedWorkflowAccessError


@dataclass(frozen=True)
class SandboxRestrictions:
    """Kept for Temporal's configuration calls; there is no sandbox for them to configure."""

    passthrough_modules: frozenset[str] = field(default_factory=frozenset)
    passthrough_all_modules: bool = False

    default: ClassVar[SandboxRestrictions]

    def with_passthrough_modules(self, *modules: str) -> SandboxRestrictions:
        return replace(self, passthrough_modules=self.passthrough_modules | set(modules))

    def with_passthrough_all_modules(self) -> SandboxRestrictions:
        return replace(self, passthrough_all_modules=True)


SandboxRestrictions.default = SandboxRestrictions()


class WorkflowRunner:
    """How a worker runs workflow code; every runner here runs it in the worker's process."""


class UnsandboxedWorkflowRunner(WorkflowRunner):
    """Runs workflow code directly, the only way Chronicle runs it (the default)."""


@dataclass(frozen=True)
class SandboxedWorkflowRunner(WorkflowRunner):
    """Accepted for Temporal's signature; runs workflows as ``UnsandboxedWorkflowRunner`` does.

    There is no sandbox: ``restrictions`` and ``runner_class`` are kept, not applied.
    """

    restrictions: SandboxRestrictions = SandboxRestrictions.default
    runner_class: type[WorkflowRunner] = UnsandboxedWorkflowRunner
    passthrough: Sequence[str] = ()


__all__ = [
    "RestrictedWorkflowAccessError",
    "SandboxRestrictions",
    "SandboxedWorkflowRunner",
    "UnsandboxedWorkflowRunner",
    "WorkflowRunner",
]
