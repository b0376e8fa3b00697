"""A light determinism guard: while workflow code runs, wall clocks, randomness and blocking I/O raise.

Chronicle has no sandbox. Instead, once a worker turns the guard on, these calls made from
workflow code while one of its workflow tasks runs raise ``RestrictedWorkflowAccessError``
(a ``NondeterminismError``) naming the deterministic replacement: ``time.time``,
``time.time_ns``, ``time.sleep``, ``datetime.now`` / ``utcnow`` / ``today``, ``date.today``,
the ``random`` module's functions, ``uuid.uuid1`` / ``uuid4``, ``os.urandom`` and ``open``.
They behave as before everywhere else (activities, client code, other threads).

How: the module functions are replaced by wrappers that check a per-thread flag, so a call
costs one flag read when no workflow task runs; ``datetime``'s C classmethods are wrapped in
the type's own dict, so ``from datetime import datetime`` imported anywhere is covered.
Calls made by the standard library, installed packages or the SDK itself on workflow code's
behalf (a log record's timestamp) are let through: the guard looks at the calling file. A
name imported as a bare function before the guard was installed (``from time import time``)
is not covered: it is a guard, not a sandbox.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import datetime as _datetime
import functools
import gc
import os
import random as _random
import sys
import sysconfig
import threading
import time as _time
import uuid as _uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sdk.exceptions import RestrictedWorkflowAccessError

_REPLACEMENTS = {
    "time": "workflow.time() or workflow.now()",
    "datetime": "workflow.now()",
    "random": "workflow.random()",
    "uuid": "workflow.uuid4()",
    "os.urandom": "workflow.random()",
    "sleep": "await asyncio.sleep() or workflow.sleep() (durable timers)",
    "open": "an activity (workflow code must not do I/O)",
}
_RANDOM_FUNCTIONS = (
    "random", "uniform", "randint", "randrange", "choice", "choices", "shuffle", "sample",
    "getrandbits", "randbytes", "gauss", "normalvariate", "triangular", "expovariate",
)  # fmt: skip


class _State(threading.local):
    depth = 0  # workflow tasks running on this thread (nested activations count once each)
    lifted = 0  # sandbox_unrestricted() blocks open on this thread


_state = _State()
_installed = False
_install_lock = threading.Lock()


def _trusted_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.add(str(Path(__file__).resolve().parent.parent))  # the sdk package
    return tuple(sorted(str(Path(root).resolve()) + os.sep for root in roots))


_TRUSTED = _trusted_roots()


def _from_workflow_code(depth: int) -> bool:
    """Whether the caller ``depth`` frames up is workflow code (not the stdlib, a package or the SDK)."""
    filename = sys._getframe(depth + 1).f_code.co_filename
    return not (filename.startswith("<frozen") or filename.startswith(_TRUSTED))


def _check(what: str, replacement: str) -> None:
    if _state.depth and not _state.lifted and _from_workflow_code(2):
        raise RestrictedWorkflowAccessError(
            f"Cannot call {what} from workflow code: it is not deterministic, so a replay would "
            f"differ. Use {replacement} instead (or, if the value never affects what the workflow "
            "does, wrap the call in workflow.unsafe.sandbox_unrestricted())."
        )


def _guarded(fn: Callable[..., Any], what: str, replacement: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _check(what, replacement)
        return fn(*args, **kwargs)

    guarded.__chronicle_guarded__ = fn  # type: ignore[attr-defined]
    return guarded


def _wrap_attribute(owner: Any, name: str, what: str, replacement: str) -> None:
    current = getattr(owner, name, None)
    if current is not None and not hasattr(current, "__chronicle_guarded__"):
        setattr(owner, name, _guarded(current, what, replacement))


def _wrap_classmethod(cls: type, name: str, replacement: str) -> None:
    """Wrap a C type's classmethod in the type's own dict (there is no setattr on builtin types)."""
    real_dict = gc.get_referents(cls.__dict__)[0]
    original = real_dict.get(name)
    if original is None or hasattr(original, "__chronicle_guarded__"):
        return
    what = f"{cls.__name__}.{name}()"

    def call(klass: type, *args: Any, **kwargs: Any) -> Any:
        _check(what, replacement)
        return original.__get__(None, klass)(*args, **kwargs)

    wrapper: classmethod[Any, Any, Any] = classmethod(call)
    wrapper.__chronicle_guarded__ = original  # type: ignore[attr-defined]
    real_dict[name] = wrapper
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


def install() -> None:
    """Put the wrappers in place (once per process); they do nothing until ``active()``."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _installed = True
        for name in ("time", "time_ns"):
            _wrap_attribute(_time, name, f"time.{name}()", _REPLACEMENTS["time"])
        _wrap_attribute(_time, "sleep", "time.sleep()", _REPLACEMENTS["sleep"])
        for name in _RANDOM_FUNCTIONS:
            _wrap_attribute(_random, name, f"random.{name}()", _REPLACEMENTS["random"])
        for name in ("uuid1", "uuid4"):
            _wrap_attribute(_uuid, name, f"uuid.{name}()", _REPLACEMENTS["uuid"])
        _wrap_attribute(os, "urandom", "os.urandom()", _REPLACEMENTS["os.urandom"])
        _wrap_attribute(builtins, "open", "open()", _REPLACEMENTS["open"])
        for name in ("now", "utcnow", "today"):
            _wrap_classmethod(_datetime.datetime, name, _REPLACEMENTS["datetime"])
        _wrap_classmethod(_datetime.date, "today", _REPLACEMENTS["datetime"])


@contextlib.contextmanager
def active() -> Iterator[None]:
    """The guard applies on this thread while workflow code runs in this block."""
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1


@contextlib.contextmanager
def lifted() -> Iterator[None]:
    _state.lifted += 1
    try:
        yield
    finally:
        _state.lifted -= 1


def is_lifted() -> bool:
    return bool(_state.lifted)
