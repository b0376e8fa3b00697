"""Marking the API views that wait on their thread, for the frontend's thread choice.

Its own module with no imports, so ``chronicle.asgi`` can read it before Django is set up.
"""

from __future__ import annotations

from typing import TypeVar

_WAITS_ON_ITS_THREAD = "chronicle_waits_on_its_thread"
V = TypeVar("V", bound=type)


def waits_on_its_thread(view_class: type | None) -> bool:
    """Whether a view class was marked with :func:`waiting_view`."""
    return bool(getattr(view_class, _WAITS_ON_ITS_THREAD, False))


def waiting_view(view_class: V) -> V:
    """Mark a sync view that can block its thread while it waits for a notification (a
    history long-poll, a query): the frontend gives each of its requests a thread of its
    own instead of one of the pool that serves the views answering at once."""
    setattr(view_class, _WAITS_ON_ITS_THREAD, True)
    return view_class
