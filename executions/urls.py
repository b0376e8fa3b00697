"""The client API's URLs. Start, signal-with-start, signal and history are not here: the
lean lane serves them in front of Django (:mod:`executions.lane`)."""

from __future__ import annotations

from django.urls import path

from executions import api, batch_api, schedule_api

_w = "workflows/<str:workflow_id>"
_r = _w + "/runs/<str:run_id>"
urlpatterns = [
    path("workflows", api.WorkflowListApi.as_view(), name="workflows"),
    path("workflow-count", api.WorkflowCountApi.as_view()),
    path("payloads/<str:digest>", api.PayloadApi.as_view()),
    path("schedules", schedule_api.ScheduleListApi.as_view()),
    path("schedules/<str:schedule_id>", schedule_api.ScheduleDetailApi.as_view()),
    path("schedules/<str:schedule_id>/update", schedule_api.ScheduleUpdateApi.as_view()),
    path("schedules/<str:schedule_id>/pause", schedule_api.SchedulePauseApi.as_view()),
    path("schedules/<str:schedule_id>/unpause", schedule_api.ScheduleUnpauseApi.as_view()),
    path("schedules/<str:schedule_id>/trigger", schedule_api.ScheduleTriggerApi.as_view()),
    path("schedules/<str:schedule_id>/backfill", schedule_api.ScheduleBackfillApi.as_view()),
    path("search-attributes", api.SearchAttributeListApi.as_view()),
    path("search-attributes/<str:name>", api.SearchAttributeDetailApi.as_view()),
    path("batch-operations", batch_api.BatchListApi.as_view()),
    path("batch-operations/<str:job_id>", batch_api.BatchDetailApi.as_view()),
    path("batch-operations/<str:job_id>/stop", batch_api.BatchStopApi.as_view()),
]
for prefix in (_w, _r):
    urlpatterns += [
        path(prefix, api.WorkflowDetailApi.as_view()),
        path(prefix + "/query", api.QueryApi.as_view()),
        path(prefix + "/cancel", api.CancelApi.as_view()),
        path(prefix + "/terminate", api.TerminateApi.as_view()),
        path(prefix + "/reset", api.ResetApi.as_view()),
        path(prefix + "/reset-preview", api.ResetPreviewApi.as_view()),
    ]
