"""factory-boy factories for tenants, keys, UI users and executions.

Executions are created through ``history.kernel.start_workflow_execution`` only:
a row written behind the kernel's back would skip its history, tasks and timers
and test a state the product can never reach.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.db import connection
from factory.django import DjangoModelFactory, Password

from history import kernel
from history.models import WorkflowExecution
from namespaces.models import ApiKey, MemberRole, Membership, Namespace, Role
from namespaces.services import api_key_issue, namespace_create


class NamespaceFactory(DjangoModelFactory[Namespace]):
    class Meta:
        model = Namespace

    name = factory.LazyFunction(lambda: f"ns-{uuid.uuid4().hex[:12]}")

    @classmethod
    def _create(cls, model_class: type[Namespace], *args: Any, **kwargs: Any) -> Namespace:
        return namespace_create(**kwargs)


@dataclass(frozen=True)
class IssuedApiKey:
    """A stored key and its clear text, which only exists at issue time."""

    api_key: ApiKey
    raw: str

    @property
    def authorization(self) -> str:
        return f"Bearer {self.raw}"


class ApiKeyFactory(factory.Factory[IssuedApiKey]):
    """Issue a key through the service; ``.raw`` is the clear key to send."""

    class Meta:
        model = IssuedApiKey

    namespace = factory.SubFactory(NamespaceFactory)
    name = factory.Sequence(lambda n: f"key-{n}")
    roles = factory.LazyFunction(lambda: [Role.CLIENT, Role.WORKER])

    @classmethod
    def _create(cls, model_class: type[IssuedApiKey], *args: Any, **kwargs: Any) -> IssuedApiKey:
        key, raw = api_key_issue(namespace=kwargs["namespace"], name=kwargs["name"], roles=kwargs["roles"])
        return IssuedApiKey(key, raw)

    @classmethod
    def _build(cls, model_class: type[IssuedApiKey], *args: Any, **kwargs: Any) -> IssuedApiKey:
        raise TypeError("API keys only exist once issued: use create()")


class UserFactory(DjangoModelFactory[Any]):
    """A UI user; log in with the ``password`` given (default ``"password"``)."""

    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user-{n}")
    password = Password("password")


class MembershipFactory(DjangoModelFactory[Membership]):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    namespace = factory.SubFactory(NamespaceFactory)
    role = MemberRole.VIEWER


class ExecutionFactory(factory.Factory[WorkflowExecution]):
    """Start a run through the kernel; any ``StartRequest`` field may be passed."""

    class Meta:
        model = WorkflowExecution

    namespace = factory.SubFactory(NamespaceFactory)
    workflow_id = factory.Sequence(lambda n: f"wf-{n}")
    workflow_type = "TestWorkflow"
    task_queue = factory.Sequence(lambda n: f"queue-{n}")

    @classmethod
    def _create(cls, model_class: type[WorkflowExecution], *args: Any, **kwargs: Any) -> WorkflowExecution:
        namespace = kwargs.pop("namespace")
        result = kernel.start_workflow_execution(namespace, kernel.StartRequest(**kwargs))
        return WorkflowExecution.objects.get(run_id=result.run_id)

    @classmethod
    def _build(cls, model_class: type[WorkflowExecution], *args: Any, **kwargs: Any) -> WorkflowExecution:
        raise TypeError("executions only exist through the kernel: use create()")


# Visibility volume: rows for planner and latency figures, not states to test behaviour on.
VOLUME_TYPES = ("Order", "Refund", "Shipment", "Invoice")
VOLUME_STATUSES = ("Running", "Completed", "Completed", "Completed", "Failed", "Completed", "Canceled")
_VOLUME_SQL = {
    "run_id": "gen_random_uuid()",
    "first_run_id": "gen_random_uuid()",
    "workflow_id": "'vol-' || i",
    "workflow_type": f"(ARRAY[{', '.join(repr(t) for t in VOLUME_TYPES)}])[1 + i %% 4]",
    "task_queue": "'volume'",
    "shard_id": "i %% 16",
    "status": f"(ARRAY[{', '.join(repr(s) for s in VOLUME_STATUSES)}])[1 + i %% 7]",
    "next_event_id": "3 + i %% 40",
    "start_time": "now() - i * interval '1 second'",
    "execution_time": "now() - i * interval '1 second'",
    "close_time": "CASE WHEN i %% 7 = 0 THEN NULL ELSE now() - (i - 90) * interval '1 second' END",
    "search_attributes": (
        "jsonb_build_object('CustomerId', 'c-' || (i %% 1000), 'Amount', (i * 31) %% 10000, 'Due',"
        " to_char(timestamp '2026-01-01' + ((i * 7919) %% 100000) * interval '1 minute',"
        ' \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\'))'
    ),
}


def bulk_insert_runs(namespace: Namespace, count: int) -> None:
    """Insert ``count`` runs with one SQL statement (about 1 s per 50,000).

    A run of index ``i`` has workflow id ``vol-i``, type ``VOLUME_TYPES[i % 4]``, status
    ``VOLUME_STATUSES[i % 7]`` (``Running`` when ``i % 7 == 0``), started ``i`` seconds ago,
    and search attributes ``CustomerId = c-<i % 1000>``, ``Amount = (31 i) % 10000`` and ``Due``
    ``(7919 i) % 100000`` minutes after 2026-01-01 (register them first). These rows have no history:
    they exist to give the planner and the benchmark realistic volume, never to exercise
    the kernel, which ``ExecutionFactory`` does.
    """
    columns, selects, params = [], [], []
    for model_field in WorkflowExecution._meta.concrete_fields:
        columns.append(f'"{model_field.column}"')
        if model_field.column == "namespace_id":
            selects.append("%s")
            params.append(namespace.pk)
        elif model_field.column in _VOLUME_SQL:
            selects.append(_VOLUME_SQL[model_field.column])
        else:
            selects.append("%s")
            params.append(model_field.get_db_prep_save(model_field.get_default(), connection))
    table = WorkflowExecution._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) "
            f"SELECT {', '.join(selects)} FROM generate_series(1, %s) AS g(i)",
            [*params, count],
        )
        cursor.execute(f"ANALYZE {table}")
