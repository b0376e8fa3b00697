"""Where a command connects, and running its calls on the SDK's client.

The connection comes from the chain the SDK shares (``sdk.envconfig``): explicit flags
(``--address --namespace --api-key --profile``), then environment variables, then the TOML
profile, then ``.chronicle/dev.json`` (what ``make run`` writes). The flags are accepted on
the root command and on every command (``chronicle -o json workflow list`` and
``chronicle workflow list -o json`` both work, as in Temporal's CLI); the later one wins.

Calls go through ``sdk.client.Client`` and its ``HttpTransport``: no second HTTP stack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sdk.cli.errors import CliError, ExitCode
from sdk.cli.output import FORMATS

if TYPE_CHECKING:
    from sdk.client import Client

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# A command line wants an answer soon: fewer retries than a worker's, a shorter backoff.
CLI_RETRY_ATTEMPTS = 3
CLI_RETRY_MAXIMUM = 2.0


@dataclass
class Options:
    """The connection and output flags seen so far on the command line."""

    address: str | None = None
    namespace: str | None = None
    api_key: str | None = None
    profile: str | None = None
    output: str = "table"


@dataclass(frozen=True)
class Connection:
    url: str
    namespace: str
    api_key: str | None


def options(ctx: click.Context) -> Options:
    return ctx.ensure_object(Options)


def _store(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            setattr(options(ctx), field, value)

    return callback


def common_options(command: F) -> F:
    """Add the connection and ``--output`` flags (the same set on the root and each command)."""
    flags = [
        click.option(
            "-o", "--output", type=click.Choice(FORMATS), help="Output format (default table).",
            expose_value=False, callback=_store("output"), is_eager=True,
        ),
        click.option(
            "--profile", metavar="NAME", help="TOML profile (default CHRONICLE_PROFILE or 'default').",
            expose_value=False, callback=_store("profile"), is_eager=True,
        ),
        click.option(
            "--api-key", metavar="KEY", help="API key (default CHRONICLE_API_KEY).",
            expose_value=False, callback=_store("api_key"), is_eager=True,
        ),
        click.option(
            "-n", "--namespace", metavar="NAME", help="Namespace (default CHRONICLE_NAMESPACE).",
            expose_value=False, callback=_store("namespace"), is_eager=True,
        ),
        click.option(
            "--address", metavar="URL", help="Server URL or host:port (default CHRONICLE_URL).",
            expose_value=False, callback=_store("address"), is_eager=True,
        ),
    ]  # fmt: skip
    for flag in flags:
        command = flag(command)
    return command


def resolve(opts: Options) -> Connection:
    """Flags first, then ``sdk.envconfig``'s chain for the chosen profile.

    As in ``Client.connect``, a namespace and key the chain found for another server are not
    used with an explicit ``--address``: credentials belong with the address they came with.
    """
    from sdk.envconfig import ClientConfig, ClientConnectConfig, base_url

    try:
        loaded = ClientConfig.load_client_connect_config(
            opts.profile, config_file_strict=opts.profile is not None
        )
    except (ValueError, OSError) as exc:
        raise CliError(f"cannot read the connection profile: {exc}", ExitCode.USAGE) from exc
    if opts.address and loaded.get("target_host") not in (None, opts.address):
        loaded = ClientConnectConfig()
    host = opts.address or loaded.get("target_host")
    if not host:
        raise CliError(
            "no server address: pass --address, set CHRONICLE_URL, add a profile to "
            "~/.config/chronicle/chronicle.toml, or start the dev server (make run)",
            ExitCode.USAGE,
        )
    return Connection(
        url=base_url(host),
        namespace=opts.namespace or loaded.get("namespace") or "default",
        api_key=opts.api_key or loaded.get("api_key"),
    )


def connect(connection: Connection) -> Client:
    """The SDK's client for ``connection``, with a command line's retry budget."""
    from sdk._http import HttpTransport, RetrySettings
    from sdk.client import Client, default_identity
    from sdk.converter import default_converter

    transport = HttpTransport(
        connection.url,
        connection.namespace,
        connection.api_key,
        retry=RetrySettings(attempts=CLI_RETRY_ATTEMPTS, maximum=CLI_RETRY_MAXIMUM),
    )
    return Client(transport, data_converter=default_converter, identity=f"chronicle-cli {default_identity()}")


def run(ctx: click.Context, call: Callable[[Client], Awaitable[T]]) -> T:
    """Connect, run ``call`` on the client, close: the body of every command that talks."""
    client = connect(resolve(options(ctx)))

    async def main() -> T:
        try:
            return await call(client)
        finally:
            await client.close()

    return asyncio.run(main())
