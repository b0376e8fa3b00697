"""Routes of the operator UI (see the ``executions.ui`` package)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.views import serve
from django.urls import path, re_path

from executions.ui import executions as ui
from executions.ui import settings

WORKFLOW = "ns/<str:namespace>/workflows/<path:workflow_id>/runs/<str:run_id>/"

urlpatterns = [
    path("", ui.index, name="index"),
    path("login/", auth_views.LoginView.as_view(template_name="ui/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="/"), name="logout"),
    path("ns/<str:namespace>/", ui.execution_list, name="ui-executions"),
    path(WORKFLOW, ui.execution_detail, name="ui-execution"),
    path(WORKFLOW + "<str:action>/", ui.execution_action, name="ui-action"),
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
    path("ns/<str:namespace>/settings/api-keys/", settings.api_keys, name="ui-settings-api-keys"),
    # The UI's stylesheet is served by the app itself, so a deployment needs no web server for it.
    re_path(r"^static/(?P<path>chronicle/.+)$", serve, {"insecure": True}),
]
