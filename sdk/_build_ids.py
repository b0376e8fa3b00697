"""Worker versioning on the client: a task queue's current (default) build id.

Named as in Temporal's client. The server keeps one current build per task queue and
the history of changes; each build that was ever current is its own version set here,
oldest first, so the last set holds the default build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BuildIdOpAddNewDefault:
    """Make ``build_id`` the queue's default: new runs are pinned to it from now on."""

    build_id: str


@dataclass(frozen=True)
class BuildIdVersionSet:
    build_ids: list[str]

    def default(self) -> str:
        return self.build_ids[-1]


@dataclass(frozen=True)
class WorkerBuildIdVersionSets:
    """The queue's builds, oldest first; the last set's build is the current default."""

    version_sets: list[BuildIdVersionSet]

    @property
    def default_set(self) -> BuildIdVersionSet:
        return self.version_sets[-1]

    def default_build_id(self) -> str:
        return self.default_set.default()

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> WorkerBuildIdVersionSets | None:
        """None for an unversioned queue (no build was ever made current)."""
        builds: list[str] = []
        for change in reversed(data.get("changes") or []):
            if change["build_id"] in builds:
                builds.remove(change["build_id"])
            builds.append(change["build_id"])
        if not builds:
            return None
        return cls([BuildIdVersionSet([build]) for build in builds])
