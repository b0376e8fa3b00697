"""Provisioning over REST: namespaces, API keys, members and queue limits.

Two credentials reach these views (``namespaces.operator_keys.ProvisioningAuthentication``):

* an **operator key** (``chrop_...``, a superuser's) may do everything, on any namespace;
  only it creates, lists and deletes namespaces;
* a namespace **API key with the admin role** manages its own namespace: settings, keys,
  members, queue limits. A key of another namespace gets 404 and a key without the admin
  role 403, as ``namespaces.auth.access_namespace`` answers everywhere else.

Each view validates its body, passes that gate and calls one operation of
:mod:`executions.provisioning` (the services plus the audit entry).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chronicle.api import refuse_nul, refuse_unknown_fields
from chronicle.errors import ChronicleError, ErrorCode
from chronicle.openapi import endpoint
from executions import provisioning
from executions import provisioning_schemas as schemas
from executions.provisioning import Caller
from namespaces.auth import access_namespace
from namespaces.models import ApiKey, Namespace, OperatorKey
from namespaces.operator_keys import ProvisioningAuthentication

TAG = "provisioning"


class _Schema(AutoSchema):
    """Described with the API's one ``bearerAuth`` scheme: the header is the same, only the
    key differs (an operator key or a namespace key), as each operation's summary says."""

    def get_auth(self) -> list[dict[str, list[Any]]]:
        return [{"bearerAuth": []}]


class ProvisioningApi(APIView):
    authentication_classes = [ProvisioningAuthentication]
    schema = _Schema()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        for value in kwargs.values():
            refuse_nul(str(value), "the path")
        super().initial(request, *args, **kwargs)

    @staticmethod
    def operator(request: Request, reason: str = "") -> Caller:
        """The caller, who must hold an operator key: 403 for a namespace key."""
        key = request.auth
        if not isinstance(key, OperatorKey):
            raise ChronicleError(
                ErrorCode.PERMISSION_DENIED, "this call needs an operator key (a superuser's, chrop_...)"
            )
        return Caller(f"{key.user.get_username()} (operator key {key.prefix})", reason)

    @classmethod
    def managed(cls, request: Request, name: str, reason: str = "") -> tuple[Namespace, Caller]:
        """The namespace the caller manages: any, for an operator; its own, for an admin key."""
        key = request.auth
        if isinstance(key, OperatorKey):
            namespace = Namespace.objects.filter(name=name).first()
            if namespace is None:
                raise ChronicleError(ErrorCode.NOT_FOUND, f"namespace {name!r} not found")
            return namespace, cls.operator(request, reason)
        gated = access_namespace(key, name, "admin")
        assert isinstance(key, ApiKey)
        # Read afresh: the gate's namespace may come from this process's key cache, seconds
        # old, and a change made through another process must show (and not be written over).
        namespace = Namespace.objects.get(pk=gated.pk)
        return namespace, Caller(f"api key {key.name} ({key.prefix})", reason)


def _valid(serializer: Any) -> Any:
    """The validated serializer; a field it does not know (a misspelt setting) is refused,
    not ignored: in a query string too, here."""
    refuse_unknown_fields(serializer, serializer.initial_data)
    serializer.is_valid(raise_exception=True)
    return serializer


# -- namespaces ----------------------------------------------------------------------------


class NamespaceListApi(ProvisioningApi):
    @endpoint(
        summary="List every namespace (operator key)",
        tag=TAG,
        response=schemas.NamespaceListSerializer,
        operation_id="list_namespaces",
    )
    def get(self, request: Request) -> Response:
        self.operator(request)
        return Response({"namespaces": provisioning.namespace_rows()})

    @endpoint(
        summary="Create a namespace, optionally with settings (operator key)",
        tag=TAG,
        request=schemas.NamespaceCreateSerializer,
        response=schemas.NamespaceSerializer,
        success=(201,),
        operation_id="create_namespace",
    )
    def post(self, request: Request) -> Response:
        caller = self.operator(request)
        body = _valid(schemas.NamespaceCreateSerializer(data=request.data))
        caller = Caller(caller.actor, body.validated_data["reason"])
        namespace = provisioning.namespace_create(caller, body.validated_data["name"], body.settings())
        return Response(provisioning.namespace_view(namespace), status=201)


class NamespaceDetailApi(ProvisioningApi):
    @endpoint(
        summary="Describe a namespace: settings, key and member counts, queue limits",
        tag=TAG,
        response=schemas.NamespaceSerializer,
        operation_id="describe_namespace",
    )
    def get(self, request: Request, namespace: str) -> Response:
        ns, _ = self.managed(request, namespace)
        return Response(provisioning.namespace_view(ns))

    @endpoint(
        summary="Change a namespace's settings (retention, history and payload limits, rate limits)",
        tag=TAG,
        request=schemas.NamespaceSettingsSerializer,
        response=schemas.NamespaceUpdatedSerializer,
        operation_id="update_namespace",
    )
    def patch(self, request: Request, namespace: str) -> Response:
        ns, caller = self.managed(request, namespace)
        body = _valid(schemas.NamespaceSettingsSerializer(data=request.data))
        caller = Caller(caller.actor, body.validated_data["reason"])
        changed = provisioning.namespace_update(caller, ns, body.settings())
        return Response({"changed": changed, "namespace": provisioning.namespace_view(ns)})

    @endpoint(
        summary="Delete a namespace and all it holds; confirm= must repeat its name (operator key)",
        tag=TAG,
        parameters=[schemas.NamespaceDeleteSerializer],
        response=schemas.NamespaceDeletedSerializer,
        operation_id="delete_namespace",
    )
    def delete(self, request: Request, namespace: str) -> Response:
        self.operator(request)
        params = _valid(schemas.NamespaceDeleteSerializer(data=request.query_params))
        ns, caller = self.managed(request, namespace, params.validated_data["reason"])
        removed = provisioning.namespace_delete(caller, ns, params.validated_data["confirm"])
        return Response({"deleted": ns.name, "removed": removed})


# -- API keys ------------------------------------------------------------------------------


def _key_id(raw: str) -> int:
    if not raw.isdigit() or len(raw) > 18:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "an API key id is a whole number")
    return int(raw)


class ApiKeyListApi(ProvisioningApi):
    @endpoint(
        summary="List the namespace's API keys (never the keys themselves)",
        tag=TAG,
        response=schemas.ApiKeyListSerializer,
        operation_id="list_api_keys",
    )
    def get(self, request: Request, namespace: str) -> Response:
        ns, _ = self.managed(request, namespace)
        return Response({"api_keys": provisioning.key_rows(ns)})

    @endpoint(
        summary="Create an API key; the key is in this answer only",
        tag=TAG,
        request=schemas.ApiKeyCreateSerializer,
        response=schemas.IssuedApiKeySerializer,
        success=(201,),
        operation_id="create_api_key",
    )
    def post(self, request: Request, namespace: str) -> Response:
        ns, caller = self.managed(request, namespace)
        body = _valid(schemas.ApiKeyCreateSerializer(data=request.data)).validated_data
        key, raw = provisioning.api_key_create(
            Caller(caller.actor, body["reason"]), ns, body["name"], body["roles"], body["expires_at"]
        )
        return Response({"key": provisioning.key_view(key), "api_key": raw}, status=201)


class ApiKeyRevokeApi(ProvisioningApi):
    @endpoint(
        summary="Revoke an API key at once (idempotent)",
        tag=TAG,
        request=schemas.ReasonSerializer,
        response=schemas.ApiKeySerializer,
        operation_id="revoke_api_key",
    )
    def post(self, request: Request, namespace: str, key_id: str) -> Response:
        ns, caller = self.managed(request, namespace)
        body = _valid(schemas.ReasonSerializer(data=request.data)).validated_data
        key = provisioning.api_key_revoke(Caller(caller.actor, body["reason"]), ns, _key_id(key_id))
        return Response(provisioning.key_view(key))


class ApiKeyRotateApi(ProvisioningApi):
    @endpoint(
        summary="Rotate an API key: a new key now (shown once), the old one expiring after a grace period",
        tag=TAG,
        request=schemas.ApiKeyRotateSerializer,
        response=schemas.RotatedApiKeySerializer,
        success=(201,),
        operation_id="rotate_api_key",
    )
    def post(self, request: Request, namespace: str, key_id: str) -> Response:
        ns, caller = self.managed(request, namespace)
        body = _valid(schemas.ApiKeyRotateSerializer(data=request.data)).validated_data
        old, new, raw = provisioning.api_key_rotate(
            Caller(caller.actor, body["reason"]),
            ns,
            _key_id(key_id),
            timedelta(seconds=body["grace_seconds"]),
        )
        return Response(
            {"old_key": provisioning.key_view(old), "key": provisioning.key_view(new), "api_key": raw},
            status=201,
        )


# -- members and queue limits --------------------------------------------------------------


class MemberListApi(ProvisioningApi):
    @endpoint(
        summary="List the namespace's members and their roles",
        tag=TAG,
        response=schemas.MemberListSerializer,
        operation_id="list_members",
    )
    def get(self, request: Request, namespace: str) -> Response:
        ns, _ = self.managed(request, namespace)
        return Response({"members": provisioning.member_rows(ns)})

    @endpoint(
        summary="Grant a user a role (or change it); with new_user, create the account first",
        tag=TAG,
        request=schemas.MemberGrantSerializer,
        response=schemas.MemberGrantedSerializer,
        success=(200, 201),
        operation_id="grant_member",
    )
    def post(self, request: Request, namespace: str) -> Response:
        ns, caller = self.managed(request, namespace)
        body = _valid(schemas.MemberGrantSerializer(data=request.data)).validated_data
        caller = Caller(caller.actor, body["reason"])
        if body["new_user"]:
            username, password = provisioning.member_create_user(
                caller, ns, body["username"], body["role"], body["email"]
            )
            member = {"username": username, "role": body["role"]}
            changed = {username: {"old": None, "new": body["role"]}}
            return Response({"changed": changed, "member": member, "one_time_password": password}, status=201)
        changed = provisioning.member_set(caller, ns, body["username"], body["role"])
        return Response({"changed": changed, "member": {"username": body["username"], "role": body["role"]}})


class MemberDetailApi(ProvisioningApi):
    @endpoint(
        summary="Revoke a user's membership (the last admin cannot be removed)",
        tag=TAG,
        parameters=[schemas.ReasonSerializer],
        response=schemas.ChangesSerializer,
        operation_id="revoke_member",
    )
    def delete(self, request: Request, namespace: str, username: str) -> Response:
        ns, caller = self.managed(request, namespace)
        params = _valid(schemas.ReasonSerializer(data=request.query_params)).validated_data
        if not any(row["username"] == username for row in provisioning.member_rows(ns)):
            raise ChronicleError(ErrorCode.NOT_FOUND, f"{username!r} is not a member of {ns.name!r}")
        changed = provisioning.member_set(Caller(caller.actor, params["reason"]), ns, username, None)
        return Response({"changed": changed})


class QueueLimitListApi(ProvisioningApi):
    @endpoint(
        summary="List the namespace's per-task-queue dispatch limits",
        tag=TAG,
        response=schemas.QueueLimitListSerializer,
        operation_id="list_task_queue_limits",
    )
    def get(self, request: Request, namespace: str) -> Response:
        ns, _ = self.managed(request, namespace)
        return Response({"task_queue_limits": provisioning.queue_limit_rows(ns)})


class QueueLimitApi(ProvisioningApi):
    @endpoint(
        summary="Set a task queue's dispatch limit (0 or null removes it)",
        tag=TAG,
        request=schemas.QueueLimitSetSerializer,
        response=schemas.ChangesSerializer,
        operation_id="set_task_queue_limit",
    )
    def put(self, request: Request, namespace: str, task_queue: str) -> Response:
        ns, caller = self.managed(request, namespace)
        body = _valid(schemas.QueueLimitSetSerializer(data=request.data)).validated_data
        changed = provisioning.queue_limit_set(
            Caller(caller.actor, body["reason"]), ns, task_queue, body["dispatch_rps"]
        )
        return Response({"changed": changed})

    @endpoint(
        summary="Remove a task queue's dispatch limit",
        tag=TAG,
        parameters=[schemas.ReasonSerializer],
        response=schemas.ChangesSerializer,
        operation_id="remove_task_queue_limit",
    )
    def delete(self, request: Request, namespace: str, task_queue: str) -> Response:
        ns, caller = self.managed(request, namespace)
        params = _valid(schemas.ReasonSerializer(data=request.query_params)).validated_data
        changed = provisioning.queue_limit_set(Caller(caller.actor, params["reason"]), ns, task_queue, None)
        return Response({"changed": changed})
