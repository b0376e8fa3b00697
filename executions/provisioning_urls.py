"""The provisioning API's URLs, under ``/api/v1/``. None is a lean-lane path: the lane
serves only ``workflows`` (POST), ``signal-with-start``, a run's ``signal``/``history`` and
the worker's ``task-queues/<q>/<task call>`` paths."""

from __future__ import annotations

from django.urls import path

from executions import provisioning_api as api

_ns = "namespaces/<str:namespace>"
urlpatterns = [
    path("namespaces", api.NamespaceListApi.as_view(), name="provisioning-namespaces"),
    path(_ns, api.NamespaceDetailApi.as_view(), name="provisioning-namespace"),
    path(_ns + "/api-keys", api.ApiKeyListApi.as_view(), name="provisioning-api-keys"),
    path(_ns + "/api-keys/<str:key_id>/revoke", api.ApiKeyRevokeApi.as_view()),
    path(_ns + "/api-keys/<str:key_id>/rotate", api.ApiKeyRotateApi.as_view()),
    path(_ns + "/members", api.MemberListApi.as_view(), name="provisioning-members"),
    path(_ns + "/members/<str:username>", api.MemberDetailApi.as_view()),
    path(_ns + "/task-queue-limits", api.QueueLimitListApi.as_view()),
    path(_ns + "/task-queues/<str:task_queue>/limits", api.QueueLimitApi.as_view()),
]
