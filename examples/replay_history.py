"""Replay saved histories against workflow code before deploying it: a determinism check for CI.

    python -m examples.replay_history HISTORY.json [HISTORY.json ...] --workflow module:Class ...

Each file is a history as Chronicle writes it (the run page's download, ``chronicle workflow
show --output json``, ``WorkflowHistory.to_json()``) or as Temporal exports it
(``temporal workflow show --output json``), so a team bringing its workflows from Temporal can
check the ported code against the runs Temporal recorded. Exit status 0 when every history
replays, 1 when one does not (each failure is printed), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from sdk.client import WorkflowHistory
from sdk.worker import Replayer


def _workflow_class(spec: str) -> type:
    module_name, _, name = spec.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"{spec!r}: expected module:Class")
    found = getattr(importlib.import_module(module_name), name, None)
    if not isinstance(found, type):
        raise argparse.ArgumentTypeError(f"{spec!r}: no class {name!r} in {module_name}")
    return found


async def replay(paths: Sequence[Path], workflows: Sequence[type]) -> int:
    histories = [WorkflowHistory.from_json(path.stem, path.read_text(encoding="utf-8")) for path in paths]
    results = await Replayer(workflows=workflows).replay_workflows(histories, raise_on_replay_failure=False)
    for history, path in zip(histories, paths, strict=True):
        failure = results.replay_failures.get(history.run_id or history.workflow_id)
        verdict = "ok" if failure is None else f"FAILED: {type(failure).__name__}: {failure}"
        print(f"{path.name}: {len(history.events)} events, {verdict}")
    return 1 if results.replay_failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("histories", nargs="+", type=Path)
    parser.add_argument("--workflow", action="append", type=_workflow_class, required=True)
    args = parser.parse_args(argv)
    return asyncio.run(replay(args.histories, args.workflow))


if __name__ == "__main__":
    sys.exit(main())
