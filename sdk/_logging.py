"""A logger adapter that says which workflow or activity a record came from, as Temporal's do.

Each record gets the details as a dict in ``extra[<key>]`` (``temporal_workflow`` or
``temporal_activity``, Temporal's keys, so log pipelines built for them keep working) and,
unless switched off, appended to the message as ``(details)``. Outside a workflow or activity
the record passes through unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


class ContextLoggerAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Adds the details ``current()`` returns (None outside the context) to each record."""

    def __init__(
        self, logger: logging.Logger, extra_key: str, current: Callable[[], Mapping[str, Any] | None]
    ) -> None:
        super().__init__(logger, None)
        self._extra_key = extra_key
        self._current = current
        self.info_on_message = True
        self.info_on_extra = True

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        details = self._current()
        if details is None:
            return msg, kwargs
        if self.info_on_extra:
            extra = dict(kwargs.get("extra") or {})
            extra[self._extra_key] = dict(details)
            kwargs["extra"] = extra
        if self.info_on_message:
            msg = f"{msg} ({dict(details)})"
        return msg, kwargs

    @staticmethod
    def info_on_message_switch() -> property:
        """``info_on_message`` under another name (Temporal names it per adapter)."""
        return property(
            lambda self: self.info_on_message, lambda self, on: setattr(self, "info_on_message", on)
        )

    @staticmethod
    def info_on_extra_switch() -> property:
        return property(lambda self: self.info_on_extra, lambda self, on: setattr(self, "info_on_extra", on))

    @property
    def base_logger(self) -> logging.Logger:
        """The underlying ``logging.Logger`` (Temporal's name)."""
        logger: logging.Logger = self.logger
        return logger
