"""URL routes: the REST API under /api/v1/ and the OpenAPI schema."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from chronicle import clock

urlpatterns = [
    path("admin/", admin.site.urls),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]),
        name="schema",
    ),
    path("api/v1/namespaces/<str:namespace>/", include("executions.urls")),
    path("api/v1/namespaces/<str:namespace>/", include("matching.urls")),
    path("api/v1/", include("executions.provisioning_urls")),
    path("", include("executions.ui.urls")),
]
if clock.time_skipping():  # a test stack only (chronicle.clock): its clock's controls
    urlpatterns.insert(1, path("api/v1/namespaces/<str:namespace>/", include("executions.time_skipping_api")))

# Error pages in the operator UI's layout, with the way back (``executions.ui.errors``).
handler403 = "executions.ui.errors.forbidden"
handler404 = "executions.ui.errors.not_found"
handler500 = "executions.ui.errors.server_error"
