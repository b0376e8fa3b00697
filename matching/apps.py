from __future__ import annotations

from django.apps import AppConfig


class MatchingConfig(AppConfig):
    name = "matching"

    def ready(self) -> None:
        # The timer queue asks matching whether a sticky queue's worker still polls it
        # before timing a sticky task out (history may not import matching).
        from history.kernel.timers import set_sticky_poller_check
        from matching.dispatch import sticky_poller_alive

        set_sticky_poller_check(sticky_poller_alive)
