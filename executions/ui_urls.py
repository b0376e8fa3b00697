from __future__ import annotations

from django.urls import path

from executions import views

urlpatterns = [path("", views.index, name="index")]
