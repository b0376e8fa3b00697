"""The SDK's worker-versioning surface, without a server: Worker options and build-id sets."""

from __future__ import annotations

import pytest

from sdk._http import HttpTransport
from sdk.client import Client, WorkerBuildIdVersionSets
from sdk.converter import default_converter
from sdk.worker import Worker
from tests.e2e.workers.versioned_worker import Order


def _client() -> Client:
    transport = HttpTransport("http://127.0.0.1:9", namespace="ns", api_key="k")
    return Client(transport, data_converter=default_converter, identity="test")


def test_use_worker_versioning_needs_a_build_id() -> None:
    with pytest.raises(ValueError, match="build_id must be specified"):
        Worker(_client(), task_queue="q", workflows=[Order], use_worker_versioning=True)


def test_a_worker_reports_its_build_only_when_it_has_one() -> None:
    assert Worker(_client(), task_queue="q", workflows=[Order]).version_stamp is None
    recorded_only = Worker(_client(), task_queue="q", workflows=[Order], build_id="A")
    assert recorded_only.version_stamp == {"build_id": "A", "use_versioning": False}
    versioned = Worker(_client(), task_queue="q", workflows=[Order], build_id="A", use_worker_versioning=True)
    assert versioned.version_stamp == {"build_id": "A", "use_versioning": True}


def test_build_id_changes_become_version_sets_with_the_current_build_last() -> None:
    changes = [{"build_id": b} for b in ("A", "C", "B", "A")]  # newest first, as the server sends
    sets = WorkerBuildIdVersionSets.from_wire({"changes": changes})
    assert sets is not None
    assert [s.build_ids for s in sets.version_sets] == [["B"], ["C"], ["A"]]
    assert sets.default_build_id() == "A"
    assert WorkerBuildIdVersionSets.from_wire({"changes": []}) is None
