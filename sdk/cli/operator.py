"""``chronicle namespace|key|member ...``: provisioning over the REST API
(``docs/provisioning.md``).

``namespace create|list|delete`` need an operator key (``chrop_...``, made by ``manage.py
operator_key create``); everything else works with it or with the namespace's own API key
with the ``admin`` role. The key comes from ``--api-key`` / ``CHRONICLE_API_KEY`` / the
profile as for every command; the namespace a command acts on from ``-n/--namespace``
(or, for ``namespace ...``, its NAME argument). Keys and one-time passwords are printed
once, as the server answers them once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import click

from sdk.cli.connection import common_options, options, resolve, run
from sdk.cli.errors import CliError, ExitCode
from sdk.cli.output import Column, emit, format_record, format_rows

if TYPE_CHECKING:
    from sdk.client import Client

NAMESPACE_COLUMNS = [
    Column("Name", "name"),
    Column("Description", "description"),
    Column("Created", "created_at"),
]
KEY_COLUMNS = [
    Column("Id", "id"),
    Column("Name", "name"),
    Column("Prefix", "prefix"),
    Column("Roles", "roles"),
    Column("State", "state"),
    Column("Last Used", "last_used_at"),
    Column("Expires", "expires_at"),
]
MEMBER_COLUMNS = [Column("Username", "username"), Column("Role", "role")]
KEY_ROLES = ("client", "worker", "admin")
MEMBER_ROLES = ("viewer", "operator", "admin")


def _settings(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--set name=value`` pairs; the server types and checks each value."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise CliError(f"--set takes name=value, not {pair!r}", ExitCode.USAGE)
        values[name.strip()] = value
    return values


def _root(ctx: click.Context, path: str = "") -> str:
    """The absolute URL of a platform-level path (``/api/v1/namespaces``): the transport's
    own paths are relative to one namespace."""
    return f"{resolve(options(ctx)).url.rstrip('/')}/api/v1/namespaces{path}"


def _on(ctx: click.Context, name: str | None) -> None:
    """Act on namespace ``name`` when given (else the connection's namespace)."""
    if name:
        options(ctx).namespace = name


def _call(ctx: click.Context, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    async def call(client: Client) -> dict[str, Any]:
        return await client.transport.request(method, path, **kwargs) or {}

    return run(ctx, call)


def _show(ctx: click.Context, record: dict[str, Any]) -> None:
    emit(format_record(record, options(ctx).output))


def _once(ctx: click.Context, what: str) -> None:
    """The record printed next holds a secret the server never shows again: say so (stderr)."""
    if options(ctx).output == "table":
        click.echo(f"The {what} is shown once; keep it now.", err=True)


# -- namespace -------------------------------------------------------------------------------


@click.group(name="namespace")
def namespace() -> None:
    """Create, list, describe, update and delete namespaces."""


@namespace.command()
@click.argument("name")
@click.option("--description", default=None, help="What the namespace is for.")
@click.option("--retention-days", type=int, default=None, help="Days closed runs are kept.")
@click.option("--set", "pairs", multiple=True, metavar="SETTING=VALUE", help="Any other setting (repeat).")
@click.option("--reason", default="", help="Why, for the audit log.")
@common_options
@click.pass_context
def create(
    ctx: click.Context,
    name: str,
    description: str | None,
    retention_days: int | None,
    pairs: tuple[str, ...],
    reason: str,
) -> None:
    """Create a namespace (operator key)."""
    body: dict[str, Any] = {"name": name, **_settings(pairs), "reason": reason}
    if description is not None:
        body["description"] = description
    if retention_days is not None:
        body["retention_days"] = retention_days
    _show(ctx, _call(ctx, "POST", _root(ctx), body=body, idempotent=False))


@namespace.command(name="list")
@common_options
@click.pass_context
def list_namespaces(ctx: click.Context) -> None:
    """List every namespace (operator key)."""
    rows = _call(ctx, "GET", _root(ctx)).get("namespaces", [])
    emit(format_rows(rows, NAMESPACE_COLUMNS, options(ctx).output))


@namespace.command()
@click.argument("name", required=False)
@common_options
@click.pass_context
def describe(ctx: click.Context, name: str | None) -> None:
    """Show a namespace's settings, key and member counts and queue limits."""
    _on(ctx, name)
    _show(ctx, _call(ctx, "GET", _root(ctx, f"/{quote(resolve(options(ctx)).namespace, safe='')}")))


@namespace.command()
@click.argument("name", required=False)
@click.option(
    "--set", "pairs", multiple=True, required=True, metavar="SETTING=VALUE", help="A setting (repeat)."
)
@click.option("--reason", default="", help="Why, for the audit log.")
@common_options
@click.pass_context
def update(ctx: click.Context, name: str | None, pairs: tuple[str, ...], reason: str) -> None:
    """Change settings: retention, history and payload limits, rate limits."""
    _on(ctx, name)
    path = _root(ctx, f"/{quote(resolve(options(ctx)).namespace, safe='')}")
    answer = _call(ctx, "PATCH", path, body={**_settings(pairs), "reason": reason})
    _show(ctx, answer.get("changed") or {"changed": "nothing"})


@namespace.command()
@click.argument("name")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--reason", default="", help="Why, for the server's log.")
@common_options
@click.pass_context
def delete(ctx: click.Context, name: str, yes: bool, reason: str) -> None:
    """Delete a namespace and all its runs, history, keys and members (operator key)."""
    if not yes:
        typed = click.prompt(f"This deletes everything in {name!r}. Type its name to confirm", err=True)
        if typed != name:
            raise CliError("the name did not match: nothing deleted", ExitCode.USAGE)
    path = _root(ctx, f"/{quote(name, safe='')}")
    _show(ctx, _call(ctx, "DELETE", path, params={"confirm": name, "reason": reason}, idempotent=False))


# -- key -------------------------------------------------------------------------------------


@click.group(name="key")
def key() -> None:
    """Create, list, revoke and rotate the namespace's API keys."""


@key.command(name="create")
@click.option("--name", required=True, help="What the key is for.")
@click.option(
    "--role", "roles", multiple=True, required=True, type=click.Choice(KEY_ROLES), help="Repeat for more."
)
@click.option("--expires-at", default=None, metavar="ISO8601", help="Refused from then on.")
@click.option("--reason", default="", help="Why, for the audit log.")
@common_options
@click.pass_context
def create_key(
    ctx: click.Context, name: str, roles: tuple[str, ...], expires_at: str | None, reason: str
) -> None:
    """Create an API key; the key is printed once."""
    body = {"name": name, "roles": list(roles), "expires_at": expires_at, "reason": reason}
    answer = _call(ctx, "POST", "/api-keys", body=body, idempotent=False)
    _once(ctx, "API key")
    _show(ctx, {**answer.get("key", {}), "api_key": answer.get("api_key")})


@key.command(name="list")
@common_options
@click.pass_context
def list_keys(ctx: click.Context) -> None:
    """List the namespace's keys (never the keys themselves)."""
    rows = _call(ctx, "GET", "/api-keys").get("api_keys", [])
    if options(ctx).output == "table":
        rows = [{**row, "roles": ",".join(row.get("roles", []))} for row in rows]
    emit(format_rows(rows, KEY_COLUMNS, options(ctx).output))


@key.command()
@click.argument("key_id", type=int)
@click.option("--reason", default="", help="Why, for the audit log.")
@common_options
@click.pass_context
def revoke(ctx: click.Context, key_id: int, reason: str) -> None:
    """Revoke a key: refused from now on."""
    _show(ctx, _call(ctx, "POST", f"/api-keys/{key_id}/revoke", body={"reason": reason}))


@key.command()
@click.argument("key_id", type=int)
@click.option(
    "--grace-seconds", type=int, default=86_400, show_default=True, help="How long the old key works."
)
@click.option("--reason", default="", help="Why, for the audit log.")
@common_options
@click.pass_context
def rotate(ctx: click.Context, key_id: int, grace_seconds: int, reason: str) -> None:
    """A new key (printed once) with the same name and roles; the old one expires after the grace."""
    body = {"grace_seconds": grace_seconds, "reason": reason}
    answer = _call(ctx, "POST", f"/api-keys/{key_id}/rotate", body=body, idempotent=False)
    _once(ctx, "new API key")
    old = answer.get("old_key", {})
    _show(
        ctx,
        {
            **answer.get("key", {}),
            "api_key": answer.get("api_key"),
            "old_key_expires_at": old.get("expires_at"),
        },
    )


# -- member ----------------------------------------------------------------------------------


@click.group(name="member")
def member() -> None:
    """Grant, list and revoke who may use the namespace's UI, and as what."""


@member.command()
@click.argument("username")
@click.option("--role", required=True, type=click.Choice(MEMBER_ROLES), help="The member's role.")
@click.option("--new-user", is_flag=True, help="Create the account, with a one-time password printed once.")
@click.option("--email", default="", help="The new account's email.")
@click.option("--reason", default="", help="Why, for the audit log.")
@common_options
@click.pass_context
def grant(ctx: click.Context, username: str, role: str, new_user: bool, email: str, reason: str) -> None:
    """Give a user a role in the namespace (or change it)."""
    body = {"username": username, "role": role, "new_user": new_user, "email": email, "reason": reason}
    answer = _call(ctx, "POST", "/members", body=body, idempotent=False)
    record = dict(answer.get("member", {}))
    if "one_time_password" in answer:
        _once(ctx, "one-time password")
        record["one_time_password"] = answer["one_time_password"]
    _show(ctx, record)


@member.command(name="list")
@common_options
@click.pass_context
def list_members(ctx: click.Context) -> None:
    """List the members and their roles."""
    rows = _call(ctx, "GET", "/members").get("members", [])
    emit(format_rows(rows, MEMBER_COLUMNS, options(ctx).output))


@member.command(name="revoke")
@click.argument("username")
@click.option("--reason", default="", help="Why, for the audit log.")
@common_options
@click.pass_context
def revoke_member(ctx: click.Context, username: str, reason: str) -> None:
    """Remove a user from the namespace (never its last admin)."""
    answer = _call(ctx, "DELETE", f"/members/{quote(username, safe='')}", params={"reason": reason})
    _show(ctx, {"username": username, "removed": bool(answer.get("changed"))})


COMMANDS = (namespace, key, member)
