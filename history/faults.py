"""Named crash points and the planted bug for fault tests; each is a no-op unless armed.

Arm a crash point with ``CHRONICLE_FAULTS=after_commit_before_reply,...`` (process-wide)
or :func:`arm` in a test. An armed point kills the process with ``os._exit`` so the
test sees exactly what a crash in that window leaves behind.

The planted bug (:func:`planted_rollback`, :func:`answered_regardless`) exists so the
fault harness (``python -m bench.faults --planted-bug``) can show that its history
checker catches an acknowledged signal that never committed: a checker that cannot fail
proves nothing. ``CHRONICLE_FAULTS_ANSWER_BEFORE_COMMIT=<p>`` in a process's environment
rolls back each signal's transaction with probability ``p`` *after* its answer is decided,
and the caller still gets its 2xx. Only the harness's own stack sets it; unset (every
deployment), both helpers do nothing.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator

from django.conf import settings

POINTS = (
    "before_commit",
    "after_commit_before_reply",
    "daemon_after_fire_before_commit",
)
ANSWER_BEFORE_COMMIT_ENV = "CHRONICLE_FAULTS_ANSWER_BEFORE_COMMIT"
_armed: set[str] = set()
# Read once at import: the switch belongs to a process's environment, not to a request.
_rollback_rate = float(os.environ.get(ANSWER_BEFORE_COMMIT_ENV, "") or 0.0)


def arm(point: str) -> None:
    assert point in POINTS, point
    _armed.add(point)


def disarm_all() -> None:
    _armed.clear()


def crash_point(point: str) -> None:
    if point in _armed or point in settings.CHRONICLE_FAULTS:
        os._exit(97)


class PlantedRollback(Exception):
    """Raised at the end of a signal's transaction by the planted bug, to roll it back."""


def planted_rollback() -> None:
    """Last statement inside the transaction: with the planted bug on, sometimes abort it."""
    if _rollback_rate > 0 and random.random() < _rollback_rate:
        raise PlantedRollback


@contextlib.contextmanager
def answered_regardless() -> Iterator[None]:
    """Around the transaction: swallow the planted abort, so the caller answers 2xx anyway."""
    with contextlib.suppress(PlantedRollback):
        yield
