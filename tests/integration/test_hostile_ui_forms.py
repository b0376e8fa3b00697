"""JSON typed into the UI's forms (signal input, query arguments, a batch's signal input)
is read as standard JSON: ``NaN`` and ``Infinity`` are refused on the form, as the API
refuses them, instead of failing the write with a 500."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from history.models import HistoryEvent
from namespaces.models import MemberRole
from tests.factories import ExecutionFactory, MembershipFactory, NamespaceFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("typed", ["NaN", "[1, Infinity]", '{"a": -Infinity}', "1e999"])
def test_a_signal_typed_with_a_number_json_cannot_hold_is_refused_on_the_form(typed: str) -> None:
    namespace = NamespaceFactory()
    run = ExecutionFactory(namespace=namespace, workflow_id="typed")
    client = Client()
    client.force_login(MembershipFactory(namespace=namespace, role=MemberRole.OPERATOR).user)
    events = HistoryEvent.objects.filter(run=run).count()
    url = f"/ns/{namespace.name}/workflows/typed/runs/{run.run_id}/signal/"
    form = {"signal_name": "go", "signal_input": typed, "reason": "r", "request_id": str(uuid.uuid4())}
    answer = client.post(url, form)
    assert answer.status_code == 400, answer.status_code
    assert b"signal input is not JSON" in answer.content
    assert HistoryEvent.objects.filter(run=run).count() == events
