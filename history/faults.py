"""Named crash points for fault tests; each is a no-op unless armed.

Arm with ``CHRONICLE_FAULTS=after_commit_before_reply,...`` (process-wide) or
:func:`arm` in a test. An armed point kills the process with ``os._exit`` so the
test sees exactly what a crash in that window leaves behind.
"""

from __future__ import annotations

import os

from django.conf import settings

POINTS = (
    "before_commit",
    "after_commit_before_reply",
    "daemon_after_fire_before_commit",
)
_armed: set[str] = set()


def arm(point: str) -> None:
    assert point in POINTS, point
    _armed.add(point)


def disarm_all() -> None:
    _armed.clear()


def crash_point(point: str) -> None:
    if point in _armed or point in settings.CHRONICLE_FAULTS:
        os._exit(97)
