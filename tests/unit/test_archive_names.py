"""An archive's name keeps each namespace's and workflow's archives in their own folder."""

from __future__ import annotations

import pytest

from history.kernel.archival import archive_name
from namespaces.models import Namespace


def _namespace(name: str, prefix: str = "") -> Namespace:
    return Namespace(name=name, archival_prefix=prefix)


@pytest.mark.parametrize(
    ("workflow_id", "segment"),
    [
        ("order-1", "order-1"),
        ("a/b", "a%2Fb"),
        ("../shop-b/x", "..%2Fshop-b%2Fx"),
        (".", "%2E"),
        ("..", "%2E%2E"),
        ("...", "%2E%2E%2E"),
        ("v1.2", "v1.2"),
    ],
)
def test_a_workflow_id_is_one_path_segment_inside_its_namespace(workflow_id: str, segment: str) -> None:
    name = archive_name(_namespace("shop-a", "archive/"), workflow_id, "r1")

    assert name == f"archive/shop-a/{segment}/r1.jsonl.gz"


def test_a_namespace_named_with_dots_stays_one_folder() -> None:
    assert archive_name(_namespace(".."), "wf", "r1") == "%2E%2E/wf/r1.jsonl.gz"
