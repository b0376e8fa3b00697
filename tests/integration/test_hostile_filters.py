"""List filters built to break the parser get a 400 (or the UI's refusal), never a 500.

Each one used to escape as a Python error: an integer literal past the 4,300 digits
``int()`` reads, a filter nested past the recursion limit, a moment or a duration past
what ``datetime`` holds. They are sent where a filter is read: the list and count API,
batch dry runs (through the frontend's ASGI application), the UI's list and CSV export.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.test import Client

from executions import visibility
from namespaces.models import MemberRole, Namespace
from tests.asgi_client import asgi_request
from tests.factories import ApiKeyFactory, ExecutionFactory, MembershipFactory, NamespaceFactory

pytestmark = pytest.mark.django_db(transaction=True)

HUGE = "1" * 5000
HOSTILE = {
    "an integer of 5,000 digits": f"HistoryLength = {HUGE}",
    "an integer past 64 bits": f"HistoryLength > 1{'0' * 30}",
    "a float past its range": f"HistoryLength > {HUGE}.5",
    "a moment of 5,000 digits": f"StartTime > {HUGE}",
    "a moment past 64 bits": f"StartTime > 1{'0' * 30}",
    "a duration past timedelta": "ExecutionDuration > '99999999999999999h'",
    "500 nested parentheses": "(" * 500 + "WorkflowId = 'a'" + ")" * 500,
    "1,000 nested NOTs": "NOT " * 1000 + "WorkflowId = 'a'",
    "nesting one level too deep": "(" * 33 + "WorkflowId = 'a'" + ")" * 33,
}


@pytest.fixture
def namespace() -> Namespace:
    namespace = NamespaceFactory()
    ExecutionFactory(namespace=namespace, workflow_id="kept")
    return namespace


@pytest.fixture
def tenant(namespace: Namespace) -> tuple[str, str]:
    return namespace.name, ApiKeyFactory(namespace=namespace).authorization


@pytest.mark.parametrize("query", HOSTILE.values(), ids=HOSTILE.keys())
def test_api_reads_of_a_hostile_filter_are_refused_with_400(tenant: tuple[str, str], query: str) -> None:
    name, authorization = tenant
    base = f"/api/v1/namespaces/{name}/"
    for path in ("workflows", "workflow-count"):
        answer = asgi_request(
            "GET", base + path, authorization=authorization, query=urlencode({"query": query})
        )
        assert answer.status_code == 400, (path, answer.content[:300])
        assert answer.json()["code"] == "invalid_query"
    dry_run = {"operation": "terminate", "query": query, "reason": "r", "dry_run": True}
    answer = asgi_request("POST", base + "batch-operations", json.dumps(dry_run), authorization=authorization)
    assert answer.status_code == 400, answer.content[:300]


@pytest.mark.parametrize("query", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_ui_list_and_export_refuse_a_hostile_filter(namespace: Namespace, query: str) -> None:
    name = namespace.name
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=MemberRole.VIEWER).user)
    page = client.get(f"/ns/{name}/", {"q": query})
    assert page.status_code in (200, 400), page.status_code  # the page shows the error by the box
    assert b"kept" not in page.content or page.status_code == 400
    export = client.get(f"/ns/{name}/export.csv", {"q": query})
    assert export.status_code == 400, export.status_code


def test_the_limits_are_inclusive_and_still_match() -> None:
    """The largest 64-bit integer and 32 levels of nesting are still read."""
    visibility.parse(f"HistoryLength < {visibility.MAX_INT} AND HistoryLength > {visibility.MIN_INT}")
    deepest = "(" * visibility.MAX_NESTING + "WorkflowId = 'a'" + ")" * visibility.MAX_NESTING
    assert visibility.parse(deepest).where is not None
    with pytest.raises(visibility.VisibilityQueryError, match="nests deeper than 32"):
        visibility.parse("NOT " + deepest)
    with pytest.raises(visibility.VisibilityQueryError, match="number out of range") as refused:
        visibility.parse(f"HistoryLength = {visibility.MAX_INT + 1}")
    assert refused.value.details["position"] == len("HistoryLength = ")
