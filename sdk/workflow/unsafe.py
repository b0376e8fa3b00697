"""Temporal's ``workflow.unsafe``: replay state, and the sandbox controls ported code calls.

Chronicle runs workflow code without a sandbox (no module re-importing, no restricted
proxies): ``imports_passed_through()`` is a context manager that does nothing, which is
exactly what passing imports through means when nothing is isolated, and ``in_sandbox()``
is False. What stands in for the sandbox is a light determinism guard: while a workflow
task runs, calling ``time.time()``, ``datetime.now()``, the ``random`` module, ``uuid4()``,
``time.sleep()`` or ``open()`` from workflow code raises ``RestrictedWorkflowAccessError``.
``sandbox_unrestricted()`` lifts that guard for the code in its block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sdk.workflow import _guard
from sdk.workflow._interface import _Runtime


def is_replaying() -> bool:
    """True while the run re-executes history it already recorded (e.g. after a worker restart)."""
    return _Runtime.current().workflow_is_replaying()


def is_replaying_history_events() -> bool:
    """The same as ``is_replaying()`` here: queries do not replay history."""
    return is_replaying()


def is_read_only() -> bool:
    """True inside a query handler, where issuing a command raises ReadOnlyContextError."""
    return _Runtime.current().workflow_is_read_only()


def in_sandbox() -> bool:
    """Always False: Chronicle has no workflow sandbox (see the module docstring)."""
    return False


def is_sandbox_unrestricted() -> bool:
    """True inside ``sandbox_unrestricted()``, where the determinism guard is lifted."""
    return _guard.is_lifted()


@contextlib.contextmanager
def sandbox_unrestricted() -> Iterator[None]:
    """Lift the determinism guard for this block (e.g. a deliberate, replay-safe clock read)."""
    with _guard.lifted():
        yield


@contextlib.contextmanager
def imports_passed_through() -> Iterator[None]:
    """Does nothing: with no sandbox, every import is already the process's own module.

    Ported code keeps its ``with workflow.unsafe.imports_passed_through():`` blocks unchanged.
    """
    yield
