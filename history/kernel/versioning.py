"""Worker versioning by build id: which build a run is pinned to, and what a worker reports.

A namespace admin sets a task queue's current build (``namespaces.TaskQueueBuildId``).
A run started on a queue is pinned to that build when it starts and keeps it until it
closes; every task the kernel writes for it on its own queue carries the build, and
matching hands such a task only to pollers of that build. A queue with no current
build is unversioned and its tasks carry the empty build id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from history.kernel import store
from namespaces.models import Namespace, TaskQueueBuildId

MAX_BUILD_ID_LENGTH = 255
UNVERSIONED = ""
# ``TaskQueueBuildId.current_for`` as one fixed statement (namespace, task queue): every
# start reads it, inside the statement that locks the workflow id's latest run.
CURRENT_BUILD_SQL = (
    f"SELECT build_id FROM {TaskQueueBuildId._meta.db_table} "
    "WHERE namespace_id = %s AND task_queue = %s ORDER BY id DESC LIMIT 1"
)


def current_build_id(namespace: Namespace, task_queue: str) -> str:
    """The build a new run on ``task_queue`` is pinned to (``UNVERSIONED`` if none is set)."""
    with store.bound_cursor() as cursor:
        cursor.execute(CURRENT_BUILD_SQL, [namespace.pk, task_queue])
        row = cursor.fetchone()
    return str(row[0]) if row else UNVERSIONED


@dataclass(frozen=True)
class WorkerVersionStamp:
    """What a worker says about its code: ``build_id``, and whether it opted into versioning.

    Temporal's ``WorkerVersionCapabilities`` (on polls) and ``WorkerVersionStamp`` (on
    completions) have this shape. A build id without ``use_versioning`` is only recorded:
    such a worker is unversioned and takes unversioned tasks.
    """

    build_id: str
    use_versioning: bool

    @classmethod
    def from_wire(cls, value: Any) -> WorkerVersionStamp | None:
        """Parse ``{"build_id", "use_versioning"}``; None when absent; ValueError when malformed."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError("worker version must be an object with build_id and use_versioning")
        build_id = value.get("build_id", "")
        use_versioning = value.get("use_versioning", False)
        if not isinstance(build_id, str) or len(build_id) > MAX_BUILD_ID_LENGTH or "\x00" in build_id:
            raise ValueError(f"build_id must be a string of at most {MAX_BUILD_ID_LENGTH} characters")
        if not isinstance(use_versioning, bool):
            raise ValueError("use_versioning must be true or false")
        if use_versioning and not build_id:
            raise ValueError("build_id is required when use_versioning is true")
        return cls(build_id=build_id, use_versioning=use_versioning) if build_id else None

    @property
    def dispatch_build_id(self) -> str:
        """The build whose tasks this worker may take."""
        return self.build_id if self.use_versioning else UNVERSIONED

    def as_dict(self) -> dict[str, Any]:
        return {"build_id": self.build_id, "use_versioning": self.use_versioning}


def dispatch_build_id(stamp: WorkerVersionStamp | None) -> str:
    return stamp.dispatch_build_id if stamp is not None else UNVERSIONED


def wire_build_id(build_id: str) -> str | None:
    """Builds on the API: null for unversioned."""
    return build_id or None
