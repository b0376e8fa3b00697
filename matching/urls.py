from __future__ import annotations

from django.urls import path

from matching import api

_q = "task-queues/<str:task_queue>/"
urlpatterns = [
    path("task-queues/<str:task_queue>", api.TaskQueueDescribeApi.as_view(), name="task-queue"),
    path(_q + "build-ids", api.BuildIdsApi.as_view(), name="task-queue-build-ids"),
    path(
        "workflows/<str:workflow_id>/activities/<str:activity_id>/task-token",
        api.ActivityTaskTokenApi.as_view(),
        name="activity-task-token",
    ),
]
