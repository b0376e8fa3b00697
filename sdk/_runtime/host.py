"""What the workflow instance's mixins rely on from the instance that hosts them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sdk._runtime.commands import Command
    from sdk._runtime.loop import DeterministicLoop
    from sdk.converter import DataConverter
    from sdk.workflow import Info


class IssuesCommands:
    """What the instance's mixins (activities, children) rely on from the instance that
    hosts them: its loop, converter and info, and issuing and withdrawing commands.
    Declared once, for type checking; ``WorkflowInstance`` provides them."""

    if TYPE_CHECKING:
        loop: DeterministicLoop
        converter: DataConverter
        info: Info

        def _issue(
            self,
            command_type: str,
            attributes: dict[str, Any],
            identity: str,
            on_recorded: Callable[[int], None] | None = None,
        ) -> Command: ...

        def _withdraw(self, command: Command) -> bool: ...

        def _next_seq(self) -> int: ...
