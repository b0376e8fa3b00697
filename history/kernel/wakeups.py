"""Wake-up keys: what a kernel write notifies and what a waiting poll or reader listens for.

A write queues ``pg_notify`` calls that PostgreSQL delivers at commit (DESIGN §4 step 4).
The channels and the keys on them are the contract between the kernel, which sends, and
matching's long polls and the history readers, which listen: both build the keys here,
so a key a writer sends is the key a listener waits on. Notifications only make things
fast; correctness never depends on one arriving.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db import connection

# New task rows, one counted notification per wake-up key (see task_wakeup_payload).
TASKS_CHANNEL = "chronicle_tasks_v1"
# New events of a run (its id), and its close (close_wakeup_key).
HISTORY_CHANNEL = "chronicle_history_v1"
# The largest close notification sent with its close (PostgreSQL refuses 8,000 bytes).
CLOSE_PAYLOAD_LIMIT = 7_900
# New timer rows of a shard: ``"<shard>|<fire_at epoch>"``, for the shard owner.
TIMERS_CHANNEL = "chronicle_timers_v1"


def task_wakeup_key(namespace_id: uuid.UUID | str, kind: str, task_queue: str, build_id: str) -> str:
    """What a waiting poll listens for: tasks of its kind on its queue for its build.

    The build is part of the key (length-prefixed, so no queue name can imitate it): a
    counted wake-up must reach a poll that can claim the task, not one of another build.
    """
    return f"{namespace_id}|{kind}|{len(build_id)}:{build_id}|{task_queue}"


def close_wakeup_key(run_id: uuid.UUID | str) -> str:
    """What a wait for a run's close listens for (on the history channel).

    Every appended event notifies the run's id; a client waiting only for the close
    (``CLOSE_EVENT``, what ``result()`` asks) would re-read the run on each of them.
    """
    return f"close:{run_id}"


def close_wakeup_payload(run_id: uuid.UUID | str, close: dict[str, Any]) -> str:
    """The close notification: :func:`close_wakeup_key` and, when it fits, the close itself
    (the run's status, the run after it and the close event, as JSON) after a ``|``.

    A caller waiting for the result then answers from the notification without reading the
    run again: one statement and one transaction less per ``execute_workflow``. PostgreSQL
    delivers a notification only once its transaction committed, so what it carries is as
    durable as a read; a close too big for a notification is sent as the bare key, and the
    waiter reads it.
    """
    key = close_wakeup_key(run_id)
    payload = f"{key}|{json.dumps(close, separators=(',', ':'))}"
    return payload if len(payload.encode()) <= CLOSE_PAYLOAD_LIMIT else key


def parse_history_wakeup(payload: str) -> tuple[str, str]:
    """``(key, detail)`` of a history notification; the detail is empty but for a close
    that carries itself (:func:`close_wakeup_payload`). No key contains ``|``."""
    key, _, detail = payload.partition("|")
    return key, detail


def task_wakeup_payload(key: str, count: int) -> str:
    """A task notification: the queue's wake-up key and how many tasks the transaction added.

    PostgreSQL folds identical payloads of one transaction into one notification, so the
    count travels in it: a listener wakes that many waiting polls, not all of them.
    """
    return f"{key}|{count}"


def parse_task_wakeup(payload: str) -> tuple[str, int]:
    """``(key, count)`` of :func:`task_wakeup_payload` (the count follows the last ``|``)."""
    key, _, count = payload.rpartition("|")
    return key, int(count)


def notify(channel: str, payload: str) -> None:
    """Queue one notification now, outside a unit of work (delivered at commit)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload])
