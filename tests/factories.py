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
from factory.django import DjangoModelFactory, Password

from history import kernel
from history.kernel.tokens import TaskScope
from history.models import WorkflowExecution
from matching.dispatch import poll_once
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


def made_sticky(run: WorkflowExecution, sticky_queue: str, timeout: float) -> None:
    """Take the run's first workflow task from its queue (as worker ``w1``) and complete it
    with ``sticky_queue`` as the run's sticky queue, of schedule-to-start ``timeout``."""
    task = poll_once(run.namespace, run.task_queue, "workflow", "w1")
    assert task is not None
    kernel.respond_workflow_task_completed(
        scope=scope_of(task),
        task_token=task["task_token"],
        commands=[],
        sticky_task_queue=sticky_queue,
        sticky_schedule_to_start_timeout=timeout,
    )


def scope_of(task: dict[str, Any]) -> TaskScope:
    """The scope a task's own worker answers it in: its run's namespace and its queue."""
    run = WorkflowExecution.objects.get(run_id=task["workflow_execution"]["run_id"])
    queue = task.get("task_queue") or task["workflow_execution_task_queue"]["name"]
    return TaskScope(run.namespace_id, queue)
