"""The Update examples run as programs and print what their docstrings promise."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Stack, Tenant
from tests.e2e.test_sdk_temporal_examples import _run_example


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        (
            "examples.update",
            [
                "Items after apple: 1",
                "Rejected: an item needs a name",
                "Items after pear: 2",
                "Same update id again: 2",
                "Workflow result: ['apple', 'pear']",
            ],
        ),
        (
            "examples.update_with_start",
            ["Cart: ['apple']", "Cart: ['apple', 'pear']", "Workflow result: ['apple', 'pear']"],
        ),
    ],
)
def test_update_example_prints_what_it_documents(
    stack: Stack, tenant: Tenant, tmp_path: Path, module: str, expected: list[str]
) -> None:
    output = _run_example(stack, tenant, module, tmp_path)
    for line in expected:
        assert line in output, output
