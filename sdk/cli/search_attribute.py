"""``chronicle search-attribute create|list|remove``: the namespace's custom search
attributes (the REST ``search-attributes`` endpoints; an admin key)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import click

from sdk.cli.connection import common_options, options, run
from sdk.cli.output import Column, emit, format_record, format_rows

if TYPE_CHECKING:
    from sdk.client import Client

TYPES = ("Keyword", "Text", "Int", "Double", "Bool", "Datetime", "KeywordList")
COLUMNS = [Column("Name", "name"), Column("Type", "type"), Column("Kind", "kind")]


@click.group(name="search-attribute")
def search_attribute() -> None:
    """The namespace's custom search attributes."""


def _rows(listing: dict[str, Any]) -> list[dict[str, str]]:
    """``{"system": {name: type}, "custom": {...}}`` as one row per attribute, custom first."""
    return [
        {"name": name, "type": kind, "kind": group}
        for group in ("custom", "system")
        for name, kind in sorted((listing.get(group) or {}).items())
    ]


@search_attribute.command()
@click.option("--name", required=True, help="Attribute name.")
@click.option("--type", "kind", type=click.Choice(TYPES), required=True, help="Value type.")
@common_options
@click.pass_context
def create(ctx: click.Context, name: str, kind: str) -> None:
    """Register a custom search attribute (idempotent for the same type)."""

    async def call(client: Client) -> dict[str, Any]:
        await client.transport.post("/search-attributes", {"name": name, "type": kind})
        return {"name": name, "type": kind, "registered": True}

    emit(format_record(run(ctx, call), options(ctx).output))


@search_attribute.command(name="list")
@common_options
@click.pass_context
def list_(ctx: click.Context) -> None:
    """List the system and custom search attributes."""

    async def call(client: Client) -> dict[str, Any]:
        return await client.transport.get("/search-attributes") or {}

    listing = run(ctx, call)
    fmt = options(ctx).output
    emit(format_record(listing, fmt) if fmt == "json" else format_rows(_rows(listing), COLUMNS, fmt))


@search_attribute.command()
@click.option("--name", required=True, help="Attribute name.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@common_options
@click.pass_context
def remove(ctx: click.Context, name: str, yes: bool) -> None:
    """Remove a custom search attribute; values already stored on runs are kept."""
    if not yes:
        click.confirm(f"Remove search attribute {name!r}?", abort=True, err=True)

    async def call(client: Client) -> dict[str, Any]:
        await client.transport.request("DELETE", f"/search-attributes/{quote(name, safe='')}")
        return {"name": name, "removed": True}

    emit(format_record(run(ctx, call), options(ctx).output))


COMMANDS = (search_attribute,)
