"""How results are printed: ``--output table`` (rich), ``json`` (one document) or ``jsonl``
(one object a line, for ``jq`` and ``while read``).

Commands hand over plain records (dicts) and the columns a table shows; the formatting
lives here alone. Each ``format_*`` function returns the text, so the tests read it without
a terminal; :func:`emit` prints it. rich is imported only when a table is drawn.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import click

FORMATS = ("table", "json", "jsonl")
# A table printed to a pipe or a file is not folded at 80 columns: ids stay whole.
PIPE_WIDTH = 240


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column: its header and the record key it shows."""

    header: str
    key: str


def jsonable(value: Any) -> Any:
    """``value`` with datetimes, durations, enums, bytes and dataclasses made JSON values."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def cell(value: Any) -> str:
    """One table cell: strings as they are, empty for None, anything else as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(jsonable(value), separators=(",", ":"), ensure_ascii=False)


def table_width() -> int:
    """The terminal's width on a terminal; a wide page for a pipe (``COLUMNS`` wins)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return PIPE_WIDTH


def _render_table(headers: Sequence[str], rows: Iterable[Sequence[str]], width: int | None) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console = Console(width=width or table_width(), color_system=None, highlight=False, soft_wrap=False)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().splitlines()) + "\n"


def format_rows(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], fmt: str, *, width: int | None = None
) -> str:
    """A list of records: a table of ``columns``, a JSON array, or one JSON object a line."""
    if fmt == "json":
        return json.dumps(jsonable(list(rows)), indent=2, ensure_ascii=False) + "\n"
    if fmt == "jsonl":
        return "".join(format_line(row) for row in rows)
    if not rows:
        return "(none)\n"
    return _render_table(
        [c.header for c in columns], ([cell(row.get(c.key)) for c in columns] for row in rows), width
    )


def format_record(record: Mapping[str, Any], fmt: str, *, width: int | None = None) -> str:
    """One record: a two-column table of its fields, or one JSON object."""
    if fmt == "json":
        return json.dumps(jsonable(record), indent=2, ensure_ascii=False) + "\n"
    if fmt == "jsonl":
        return format_line(record)
    return _render_table(["Field", "Value"], ([key, cell(value)] for key, value in record.items()), width)


def format_line(record: Any) -> str:
    """One compact JSON line (``jsonl``)."""
    return json.dumps(jsonable(record), separators=(",", ":"), ensure_ascii=False) + "\n"


def emit(text: str) -> None:
    click.echo(text, nl=False)


def note(message: str) -> None:
    """Progress and hints go to stderr, so stdout stays what a script parses."""
    click.echo(message, err=True)
