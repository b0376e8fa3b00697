"""The kernel's payload store: what goes out of events, what stays, and what is counted."""

from __future__ import annotations

from typing import Any

import pytest

from history import kernel
from history.models import HistoryEvent, Payload, PayloadReference, WorkflowExecution
from tests.factories import ExecutionFactory, NamespaceFactory


def _payload(text: str) -> dict[str, Any]:
    return {"metadata": {"encoding": "json/plain"}, "data": text}


def _signal(execution: WorkflowExecution, value: dict[str, Any]) -> dict[str, Any]:
    kernel.signal_workflow_execution(
        execution.namespace, workflow_id=execution.workflow_id, run_id=None, signal_name="s", input=[value]
    )
    event = HistoryEvent.objects.filter(run=execution, event_type="WorkflowExecutionSignaled").last()
    assert event is not None
    return dict(event.attributes["input"][0])


@pytest.mark.django_db
def test_a_payload_past_the_inline_limit_is_stored_once_and_referenced() -> None:
    execution = ExecutionFactory(namespace=NamespaceFactory(payload_inline_limit_bytes=1024))
    big = _payload("b" * 5000)
    first, second = _signal(execution, big), _signal(execution, big)
    assert first == second and "data" not in first
    assert first["metadata"] == big["metadata"] and first["payload_ref"]["size_bytes"] > 5000
    stored = Payload.objects.get(namespace=execution.namespace)
    assert stored.digest == first["payload_ref"]["sha256"] and stored.data == big
    assert PayloadReference.objects.filter(run=execution, digest=stored.digest).count() == 1
    execution.refresh_from_db()
    assert execution.history_size_bytes < 3000  # the references, not 10 kB of values


@pytest.mark.django_db
def test_small_payloads_and_a_zero_limit_stay_inline() -> None:
    execution = ExecutionFactory(namespace=NamespaceFactory(payload_inline_limit_bytes=1024))
    assert _signal(execution, _payload("small")) == _payload("small")
    inline_only = ExecutionFactory(namespace=NamespaceFactory(payload_inline_limit_bytes=0))
    assert _signal(inline_only, _payload("b" * 5000)) == _payload("b" * 5000)
    assert not Payload.objects.filter(namespace__in=[execution.namespace, inline_only.namespace]).exists()


@pytest.mark.django_db
def test_the_same_value_in_two_namespaces_is_stored_in_each() -> None:
    big = _payload("c" * 5000)
    one, two = ExecutionFactory(), ExecutionFactory()
    assert _signal(one, big) == _signal(two, big)
    assert Payload.objects.filter(digest=_signal(one, big)["payload_ref"]["sha256"]).count() == 2
