"""Handlers set at run time: named or dynamic signal, query and update handlers, and whether any
signal or update handler is still running (``all_handlers_finished``, for waiting before the run completes).

A handler set here is a plain callable (no ``self``). A dynamic one takes
``(name, args: Sequence[RawValue])`` for every name no other handler has. Setting a signal
handler delivers the signals buffered for it, in the order they arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sdk.workflow._interface import UpdateInfo, _Runtime

Handler = Callable[..., Any]


def set_signal_handler(name: str, handler: Handler | None) -> None:
    """Set (or with None, remove) the handler for signal ``name``."""
    _Runtime.current().workflow_set_signal_handler(name, handler)


def get_signal_handler(name: str) -> Handler | None:
    return _Runtime.current().workflow_get_signal_handler(name)


def set_dynamic_signal_handler(handler: Handler | None) -> None:
    """Set (or remove) the handler for signals no named handler takes: ``(name, args)``."""
    _Runtime.current().workflow_set_signal_handler(None, handler)


def get_dynamic_signal_handler() -> Handler | None:
    return _Runtime.current().workflow_get_signal_handler(None)


def set_query_handler(name: str, handler: Handler | None) -> None:
    """Set (or with None, remove) the handler for query ``name``."""
    _Runtime.current().workflow_set_query_handler(name, handler)


def get_query_handler(name: str) -> Handler | None:
    return _Runtime.current().workflow_get_query_handler(name)


def set_dynamic_query_handler(handler: Handler | None) -> None:
    """Set (or remove) the handler for queries no named handler takes: ``(name, args)``."""
    _Runtime.current().workflow_set_query_handler(None, handler)


def get_dynamic_query_handler() -> Handler | None:
    return _Runtime.current().workflow_get_query_handler(None)


def set_update_handler(name: str, handler: Handler | None, *, validator: Handler | None = None) -> None:
    """Set (or with None, remove) the handler for update ``name``, with an optional validator
    (same parameters, returns None, raises to reject the update before anything is written)."""
    _Runtime.current().workflow_set_update_handler(name, handler, validator)


def get_update_handler(name: str) -> Handler | None:
    return _Runtime.current().workflow_get_update_handler(name)


def set_dynamic_update_handler(handler: Handler | None, *, validator: Handler | None = None) -> None:
    """Set (or remove) the handler for updates no named handler takes: ``(name, args)``."""
    _Runtime.current().workflow_set_update_handler(None, handler, validator)


def get_dynamic_update_handler() -> Handler | None:
    return _Runtime.current().workflow_get_update_handler(None)


def current_update_info() -> UpdateInfo | None:
    """The update whose handler or validator is running (its id and name), else None."""
    return _Runtime.current().workflow_current_update_info()


def all_handlers_finished() -> bool:
    """True when no async signal or update handler is still running; wait for it before returning,
    ``await workflow.wait_condition(workflow.all_handlers_finished)``, so none is cut off."""
    return _Runtime.current().workflow_all_handlers_finished()
