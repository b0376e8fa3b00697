"""``chronicle completion bash|zsh|fish``: the shell's completion script, from click's own
completion support (``eval "$(chronicle completion bash)"``)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_CHRONICLE_COMPLETE"


@click.command(name="completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash: eval "$(chronicle completion bash)"   (in ~/.bashrc)
    zsh:  eval "$(chronicle completion zsh)"    (in ~/.zshrc)
    fish: chronicle completion fish > ~/.config/fish/completions/chronicle.fish
    """
    root = ctx.find_root()
    assert isinstance(root.command, click.Group)
    shell_class = get_completion_class(shell)
    assert shell_class is not None  # the choice admits only the shells click knows
    name = root.info_name or "chronicle"
    click.echo(shell_class(root.command, {}, name, COMPLETE_VAR).source())


COMMANDS = (completion,)
