"""The root ``chronicle`` command: its groups come from :mod:`sdk.cli.registry`, and every
failure a command lets out becomes a message and an exit code here (:mod:`sdk.cli.errors`)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import click

from sdk.cli.connection import common_options
from sdk.cli.errors import translate
from sdk.cli.registry import COMMAND_MODULES

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
PROG = "chronicle"


class RootGroup(click.Group):
    """Turns the SDK's exceptions into ``Error: ...`` and the exit code a script can test;
    lists its groups in the registry's order."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            error = translate(exc)
            if error is None:
                raise
            raise error from exc


def load_commands(modules: Sequence[str] = COMMAND_MODULES) -> list[click.Command]:
    """The click groups each registered module lists in its ``COMMANDS``."""
    commands: list[click.Command] = []
    for name in modules:
        commands.extend(importlib.import_module(name).COMMANDS)
    return commands


def build() -> click.Group:
    @click.group(cls=RootGroup, name=PROG, context_settings=CONTEXT_SETTINGS)
    @click.version_option(package_name=None, version=_version(), prog_name=PROG)
    @common_options
    def root() -> None:
        """Drive a Chronicle server from the command line: workflows, schedules, batch
        operations and search attributes, over the REST API.

        The connection comes from --address/--namespace/--api-key/--profile, then the
        CHRONICLE_* environment variables, then the TOML profile, then .chronicle/dev.json
        (what `make run` writes). Exit codes: 0 ok, 1 failed, 2 usage, 3 not found,
        4 unauthenticated, 5 permission denied, 6 server unavailable, 7 already exists.
        """

    for command in load_commands():
        root.add_command(command)
    return root


def _version() -> str:
    from sdk import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> None:
    """The console script's entry point (``chronicle``) and ``python -m sdk.cli``'s."""
    build().main(args=list(argv) if argv is not None else None, prog_name=PROG)
