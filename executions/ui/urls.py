"""Routes of the operator UI (see the ``executions.ui`` package)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.views import serve
from django.urls import path, re_path
from django.views.decorators.http import require_safe

from executions.ui import (
    audit_log,
    batch,
    lists,
    live,
    namespace_new,
    people,
    run_page,
    runs,
    schedules,
    settings,
    task_queues,
    triage,
)
from executions.ui import executions as ui

WORKFLOW = "ns/<str:namespace>/workflows/<path:workflow_id>/runs/<str:run_id>/"
SCHEDULE = "ns/<str:namespace>/schedules/<path:schedule_id>/"
BATCH = "ns/<str:namespace>/batch/"

urlpatterns = [
    path("", ui.index, name="index"),
    # A form: GET shows it, POST signs in (Django's form views would take a PUT as a POST).
    path(
        "login/",
        auth_views.LoginView.as_view(template_name="ui/login.html", http_method_names=["get", "post"]),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(next_page="/"), name="logout"),
    path("namespaces/new/", namespace_new.new_namespace, name="ui-namespace-new"),
    path("ns/<str:namespace>/", lists.execution_list, name="ui-executions"),
    path("ns/<str:namespace>/export.csv", lists.export_csv, name="ui-export"),
    path("ns/<str:namespace>/views/", lists.view_save, name="ui-view-save"),
    path("ns/<str:namespace>/views/<int:view_id>/delete/", lists.view_delete, name="ui-view-delete"),
    path("ns/<str:namespace>/triage/", triage.triage, name="ui-triage"),
    path(BATCH, batch.job_list, name="ui-batch-list"),
    path(BATCH + "new/", batch.job_new, name="ui-batch-new"),
    path(BATCH + "<str:job_id>/", batch.job_detail, name="ui-batch-job"),
    path(BATCH + "<str:job_id>/progress.json", batch.job_progress, name="ui-batch-progress"),
    path(BATCH + "<str:job_id>/rate/", batch.job_rate, name="ui-batch-rate"),
    path(BATCH + "<str:job_id>/stop/", batch.job_stop, name="ui-batch-stop"),
    path(WORKFLOW, run_page.execution_detail, name="ui-execution"),
    path(WORKFLOW + "query/", ui.execution_query, name="ui-query"),
    path(WORKFLOW + "history.json", run_page.history_download, name="ui-history-download"),
    path(WORKFLOW + "events/<int:event_id>.json", run_page.event_download, name="ui-event-download"),
    path(WORKFLOW + "<str:action>/", ui.execution_action, name="ui-action"),
    # After the run routes: an id may hold slashes, so this would also match a run's URL.
    path("ns/<str:namespace>/workflows/<path:workflow_id>/", runs.workflow_latest, name="ui-workflow"),
    path("ns/<str:namespace>/settings/", settings.general, name="ui-settings"),
    path("ns/<str:namespace>/settings/rate-limits/", settings.rate_limits, name="ui-settings-rate-limits"),
    path(
        "ns/<str:namespace>/settings/rate-limits/counts/",
        settings.rate_counts,
        name="ui-settings-rate-counts",
    ),
    path(
        "ns/<str:namespace>/settings/search-attributes/",
        settings.search_attributes,
        name="ui-settings-search-attributes",
    ),
    path("ns/<str:namespace>/settings/members/", settings.members, name="ui-settings-members"),
    path("ns/<str:namespace>/settings/members/new/", people.new_person, name="ui-settings-new-person"),
    path("ns/<str:namespace>/settings/api-keys/", settings.api_keys, name="ui-settings-api-keys"),
    path("ns/<str:namespace>/schedules/", schedules.schedule_list, name="ui-schedules"),
    # "-/" ends a schedule id (which may hold slashes) before the action's name.
    path(SCHEDULE + "-/<str:action>/", schedules.schedule_action, name="ui-schedule-action"),
    path(SCHEDULE, schedules.schedule_detail, name="ui-schedule"),
    path("ns/<str:namespace>/task-queues/", task_queues.task_queue_list, name="ui-task-queues"),
    path(
        "ns/<str:namespace>/task-queues/<str:task_queue>/",
        task_queues.task_queue_detail,
        name="ui-task-queue",
    ),
    path("ns/<str:namespace>/audit/", audit_log.audit_log, name="ui-audit"),
    # The UI's stylesheet is served by the app itself, so a deployment needs no web server for it.
    re_path(r"^static/(?P<path>chronicle/.+)$", require_safe(serve), {"insecure": True}),
]

# The execution page's live mode (``chronicle.asgi`` routes websockets here).
websocket_urlpatterns = [path(live.PATH, live.ExecutionLiveConsumer.as_asgi(), name="ui-live")]
