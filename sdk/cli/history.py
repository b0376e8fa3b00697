"""A run's history for ``workflow show``: paged, or followed as it grows (``--follow``), and
its events as lines a person reads, payloads decoded.

Following uses the server's history long-poll (``wait_new_event``): one request waits until
the run appends an event or closes, so ``show --follow`` costs nothing while the run sleeps.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sdk.cli.output import jsonable

if TYPE_CHECKING:
    from sdk.client import Client
    from sdk.converter import DataConverter

# What the server holds a follow request open for; the client waits a little longer.
WAIT_SECONDS = 30.0
PAGE_SIZE = 256
DETAIL_WIDTH = 160


def history_path(workflow_id: str, run_id: str | None) -> str:
    path = f"/workflows/{quote(workflow_id, safe='')}"
    return (path + f"/runs/{quote(run_id, safe='')}" if run_id else path) + "/history"


async def history_events(
    client: Client, workflow_id: str, run_id: str | None, *, follow: bool
) -> AsyncIterator[dict[str, Any]]:
    """Every event of the run in order; with ``follow``, then each new one until it closes.

    The first page names the run, and later requests ask for that run by id: a reset or
    a new run under the same workflow id does not switch the stream mid-way.
    """
    after, first = 0, True
    while True:
        params: dict[str, Any] = {"after_event_id": after, "page_size": PAGE_SIZE}
        if follow and not first:
            # Answered at once when events are there already; otherwise when one comes.
            params.update(wait_new_event=True, timeout=WAIT_SECONDS)
        first = False
        page = (
            await client.transport.get(
                history_path(workflow_id, run_id), params=params, timeout=WAIT_SECONDS + 30
            )
            or {}
        )
        run_id = run_id or page.get("run_id")
        events = await client.payload_refs.resolve(page.get("events") or [])
        for event in events:
            after = max(after, int(event["event_id"]))
            yield event
        if page.get("next_after_event_id"):
            continue
        if not follow or page.get("status") != "Running":
            return


def decode_payloads(value: Any, converter: DataConverter) -> Any:
    """``value`` with each payload (``{"metadata": {"encoding": ...}, "data": ...}``) replaced
    by the value it carries, for reading; a payload the converter cannot read stays as it is."""
    if isinstance(value, list):
        return [decode_payloads(item, converter) for item in value]
    if not isinstance(value, dict):
        return value
    metadata = value.get("metadata")
    if set(value) <= {"metadata", "data"} and isinstance(metadata, dict) and "encoding" in metadata:
        try:
            return converter.from_payloads([value])[0]
        except Exception:  # an encoding this converter does not know: show the payload itself
            return value
    return {key: decode_payloads(item, converter) for key, item in value.items()}


def event_row(event: dict[str, Any], converter: DataConverter) -> dict[str, Any]:
    """An event as ``show``'s table prints it: id, time, type and its attributes, decoded."""
    attributes = decode_payloads(event.get("attributes") or {}, converter)
    details = json.dumps(jsonable(attributes), separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    if len(details) > DETAIL_WIDTH:
        details = details[: DETAIL_WIDTH - 1] + "…"
    return {
        "event_id": event.get("event_id"),
        "time": str(event.get("event_time") or "")[:23],
        "type": event.get("event_type"),
        "details": "" if details == "{}" else details,
    }


def event_line(row: dict[str, Any]) -> str:
    """One event on one line (``show``'s table, which also works while following)."""
    return f"{row['event_id']!s:>5}  {row['time']:<23}  {row['type']!s:<40}  {row['details']}"


EVENT_HEADER = f"{'ID':>5}  {'TIME':<23}  {'TYPE':<40}  DETAILS"
