"""The skipped clock of a time-skipping stack, for the SDK's test environment.

Routed only when the frontend runs with ``CHRONICLE_TIME_SKIPPING`` (``chronicle.urls``):
a real deployment has no such endpoint. Under ``/api/v1/namespaces/<ns>/time-skipping``,
authenticated by the namespace's API key like every other call:

* ``GET``: the skipped clock (``env.get_current_time()``);
* ``POST .../sleep`` ``{"seconds": s}``: move it forward by ``s`` (``env.sleep()``), and
  answer once the timers it made due have fired (a few seconds at most);
* ``POST .../hold`` and ``.../release``: open and close an ``auto_time_skipping_disabled()``
  block, during which the shard owner does not jump the clock on its own.

The clock is the stack's, not the namespace's: every namespace of the stack sees one time.
Each change wakes the shard owner (an empty notification on the timers channel), so a timer
the change made due fires at once rather than at the loop's next turn.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection
from django.urls import path
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chronicle import clock
from chronicle.api import SecondsField, refuse_nul
from chronicle.openapi import endpoint
from history import time_skipping
from history.kernel.wakeups import TIMERS_CHANNEL
from namespaces.auth import access_namespace

TAG = "time-skipping"


class ClockSerializer(serializers.Serializer[Any]):
    time = serializers.DateTimeField(help_text="The skipped clock: real time plus what was skipped.")
    skipped_seconds = serializers.FloatField(help_text="How far the clock is ahead of real time.")
    holds = serializers.IntegerField(help_text="Open auto_time_skipping_disabled() blocks.")


class SleepSerializer(serializers.Serializer[Any]):
    seconds = SecondsField()


def _state(holds: int | None = None) -> dict[str, Any]:
    skipped = clock.offset()
    return {
        "time": clock.now(),
        "skipped_seconds": skipped.total_seconds(),
        "holds": time_skipping.held_count() if holds is None else holds,
    }


def _wake_shard_owner() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [TIMERS_CHANNEL])


class _ClockApi(APIView):
    def check_namespace(self, request: Request, namespace: str) -> None:
        refuse_nul(namespace, "the path")
        access_namespace(request.auth, namespace, "client")


class ClockApi(_ClockApi):
    @endpoint(summary="Read a time-skipping stack's clock", tag=TAG, response=ClockSerializer)
    def get(self, request: Request, namespace: str) -> Response:
        self.check_namespace(request, namespace)
        return Response(ClockSerializer(_state()).data)


class SleepApi(_ClockApi):
    @endpoint(
        summary="Move a time-skipping stack's clock forward",
        tag=TAG,
        request=SleepSerializer,
        response=ClockSerializer,
    )
    def post(self, request: Request, namespace: str) -> Response:
        self.check_namespace(request, namespace)
        data = SleepSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        clock.skip_by(timedelta(seconds=data.validated_data["seconds"]))
        _wake_shard_owner()
        time_skipping.wait_until_fired()
        return Response(ClockSerializer(_state()).data)


class HoldApi(_ClockApi):
    @endpoint(summary="Stop a time-skipping stack's automatic skipping", tag=TAG, response=ClockSerializer)
    def post(self, request: Request, namespace: str) -> Response:
        self.check_namespace(request, namespace)
        return Response(ClockSerializer(_state(time_skipping.hold())).data)


class ReleaseApi(_ClockApi):
    @endpoint(summary="Let a time-skipping stack skip automatically again", tag=TAG, response=ClockSerializer)
    def post(self, request: Request, namespace: str) -> Response:
        self.check_namespace(request, namespace)
        holds = time_skipping.release()
        _wake_shard_owner()
        return Response(ClockSerializer(_state(holds)).data)


urlpatterns = [
    path("time-skipping", ClockApi.as_view(), name="time-skipping"),
    path("time-skipping/sleep", SleepApi.as_view(), name="time-skipping-sleep"),
    path("time-skipping/hold", HoldApi.as_view(), name="time-skipping-hold"),
    path("time-skipping/release", ReleaseApi.as_view(), name="time-skipping-release"),
]
