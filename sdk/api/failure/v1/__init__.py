"""``Failure``: a failure as it travels, read as Temporal's message (``failure.stack_trace``, ...).

The server's JSON failure is a dict; this gives it the attribute names of Temporal's
``Failure`` message so code that reads ``err.failure.message`` or ``.stack_trace`` ports
unchanged. The ``*_failure_info`` parts stay dicts (``failure.application_failure_info["type"]``),
and item access (``failure["message"]``) keeps working for code written against the dict.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class Failure(Mapping[str, Any]):
    """A wire failure with attribute access; the cause is a ``Failure`` too."""

    def __init__(self, wire: Mapping[str, Any] | None = None) -> None:
        self._wire = dict(wire or {})

    @property
    def message(self) -> str:
        return str(self._wire.get("message") or "")

    @property
    def source(self) -> str:
        return str(self._wire.get("source") or "")

    @property
    def stack_trace(self) -> str:
        return str(self._wire.get("stack_trace") or "")

    @property
    def cause(self) -> Failure | None:
        cause = self._wire.get("cause")
        return Failure(cause) if cause else None

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_failure_info"):
            return self._wire.get(name)
        raise AttributeError(name)

    def HasField(self, name: str) -> bool:  # protobuf's name
        return self._wire.get(name) is not None

    def __getitem__(self, key: str) -> Any:
        return self._wire[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._wire)

    def __len__(self) -> int:
        return len(self._wire)

    def __repr__(self) -> str:
        return f"Failure({self._wire!r})"

    def to_wire(self) -> dict[str, Any]:
        return dict(self._wire)


__all__ = ["Failure"]
