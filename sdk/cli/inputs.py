"""Reading the command line's values: JSON inputs, durations, ``KEY=VALUE`` pairs, times.

Each reader raises ``click.BadParameter``, so a malformed value is a usage error (exit 2)
that names the flag, before anything is sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_json(text: str, what: str = "input") -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"{what} is not JSON ({exc.msg} at column {exc.colno}): {text!r}") from exc


def json_inputs(values: Sequence[str], input_file: str | None = None) -> list[Any]:
    """The arguments to send: each ``--input`` one JSON value (Temporal's CLI: one per
    argument), or the values of ``--input-file`` (one JSON value, a list for several)."""
    if input_file is not None and values:
        raise click.UsageError("give --input or --input-file, not both")
    if input_file is not None:
        with click.open_file(input_file, encoding="utf-8") as handle:
            return [parse_json(handle.read(), f"--input-file {input_file}")]
    return [parse_json(value) for value in values]


def duration(text: str) -> timedelta:
    """``90``, ``90s``, ``1.5m``, ``1h30m``, ``2d``, ``250ms``: seconds when there is no unit."""
    value = text.strip()
    try:
        return timedelta(seconds=float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise click.BadParameter(f"not a duration: {text!r} (say 30s, 5m, 1h30m or 2d)")
    return timedelta(seconds=sum(float(n) * _UNIT_SECONDS[u] for n, u in parts))


class Duration(click.ParamType[timedelta]):
    """A click type for :func:`duration`."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return duration(str(value))
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)


class Timestamp(click.ParamType[datetime]):
    """An ISO 8601 time (``2026-01-31T12:00:00Z``); a time without a zone is UTC."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            self.fail(f"not an ISO 8601 time: {value!r} (say 2026-01-31T12:00:00Z)", param, ctx)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


DURATION = Duration()
TIMESTAMP = Timestamp()


def key_values(values: Sequence[str], flag: str) -> dict[str, Any]:
    """``KEY=JSON`` pairs (``--memo note='"hi"'``, ``--search-attribute Amount=12``); a value
    that is not JSON is taken as a string (``--search-attribute Region=eu``)."""
    pairs: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{flag} takes KEY=VALUE, got {item!r}")
        try:
            pairs[key] = json.loads(raw)
        except json.JSONDecodeError:
            pairs[key] = raw
    return pairs


def upper_snake(name: str) -> str:
    """A Temporal CLI spelling as the SDK's enum member name: ``BufferOne`` -> ``BUFFER_ONE``."""
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()


def execution_options(command: F) -> F:
    """``-w/--workflow-id`` (required) and ``-r/--run-id`` (the latest run without it)."""
    command = click.option("-r", "--run-id", help="Run id (default: the latest run).")(command)
    return click.option("-w", "--workflow-id", required=True, help="Workflow id.")(command)


def input_options(command: F) -> F:
    """``-i/--input`` (one JSON argument each) and ``--input-file``."""
    command = click.option(
        "--input-file", type=click.Path(dir_okay=False, allow_dash=True), help="File holding one JSON input."
    )(command)
    return click.option(
        "-i", "--input", "inputs", multiple=True, metavar="JSON", help="A JSON argument (repeat for more)."
    )(command)
