"""The command groups of ``chronicle``, in the order ``chronicle --help`` lists them.

Each entry names a module that defines ``COMMANDS``, a sequence of click groups (or
commands). Adding a group is one line here. The modules are imported by name when the
root command is built, so a module listed here must import nothing heavy at its top
(click only; rich and httpx inside the functions that run a command).
"""

from __future__ import annotations

COMMAND_MODULES: tuple[str, ...] = (
    "sdk.cli.workflow",
    "sdk.cli.schedule",
    "sdk.cli.batch",
    "sdk.cli.search_attribute",
    "sdk.cli.operator",
    "sdk.cli.completion",
)
