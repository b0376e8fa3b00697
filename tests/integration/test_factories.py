"""The factories build what the product would: issued keys, real users, kernel runs."""

from __future__ import annotations

import pytest
from django.contrib.auth import authenticate
from django.db import IntegrityError, transaction

from history.models import ExecutionStatus, HistoryEvent, Task
from namespaces.auth import api_key_from_header
from namespaces.models import MemberRole
from tests.factories import ApiKeyFactory, ExecutionFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def test_an_issued_key_authenticates_with_its_clear_text_only() -> None:
    issued = ApiKeyFactory(roles=["client"])
    assert api_key_from_header(issued.authorization) == issued.api_key
    assert issued.raw not in issued.api_key.key_hash


def test_a_member_logs_in_and_holds_one_role_per_namespace() -> None:
    membership = MembershipFactory(role=MemberRole.OPERATOR)
    assert authenticate(username=membership.user.username, password="password") == membership.user
    with pytest.raises(IntegrityError), transaction.atomic():
        MembershipFactory(user=membership.user, namespace=membership.namespace)


def test_an_execution_starts_with_its_history_and_first_task() -> None:
    execution = ExecutionFactory(input=[1, 2])
    assert execution.status == ExecutionStatus.RUNNING
    first = HistoryEvent.objects.filter(run=execution).order_by("event_id").first()
    assert first is not None and first.event_type == "WorkflowExecutionStarted"
    assert Task.objects.filter(run=execution, kind="workflow").count() == 1


def test_executions_cannot_be_built_without_the_kernel() -> None:
    with pytest.raises(TypeError):
        ExecutionFactory.build()
