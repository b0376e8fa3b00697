"""The SDK's public names are pinned, and the SDK imports with Django and the server absent.

``sdk_exports.json`` lists every public name of every public SDK module. A name that
disappears fails the test (ported programs import it); a new name fails it too until it is
added to the list, so the list stays the whole surface and a review sees each change.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import TypeVar

import pytest

PINNED = Path(__file__).parent / "sdk_exports.json"
REPO = Path(__file__).resolve().parents[2]
SERVER_PACKAGES = [
    "django",
    "rest_framework",
    "channels",
    "chronicle",
    "namespaces",
    "history",
    "matching",
    "executions",
]


def public_names(module: types.ModuleType) -> list[str]:
    """``__all__`` when the module declares it; otherwise what it defines (not what it imports)."""
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return sorted(declared)
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or name == "annotations" or isinstance(value, types.ModuleType | TypeVar):
            continue
        if hasattr(value, "__qualname__"):
            if getattr(value, "__module__", None) != module.__name__:
                continue  # a class or function imported from elsewhere
        elif not type(value).__module__.startswith("sdk"):
            continue  # an imported constant (``UTC``) or a typing alias
        names.append(name)
    return sorted(names)


def _pinned() -> dict[str, list[str]]:
    data: dict[str, list[str]] = json.loads(PINNED.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("module_name", sorted(_pinned()))
def test_public_names_match_the_pinned_list(module_name: str) -> None:
    module = importlib.import_module(module_name)
    pinned = set(_pinned()[module_name])
    found = set(public_names(module))
    assert not pinned - found, f"{module_name} lost public names: {sorted(pinned - found)}"
    assert not found - pinned, (
        f"{module_name} has new public names; add them to {PINNED.name}: {sorted(found - pinned)}"
    )
    for name in pinned:
        assert hasattr(module, name), f"{module_name}.{name} is listed but not importable"


def test_the_sdk_imports_without_django_or_server_code() -> None:
    modules = sorted(m for m in _pinned() if m != "sdk.contrib.pydantic")
    script = (
        "import sys\n"
        f"for name in {SERVER_PACKAGES!r}:\n"
        "    sys.modules[name] = None  # importing it raises ImportError\n"
        f"for name in {modules!r}:\n"
        "    __import__(name)\n"
        f"server = {SERVER_PACKAGES!r}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in server and sys.modules[m])\n"
        "assert not loaded, loaded\n"
        "print('ok', len(sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "DATABASE"))}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd="/", env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


def test_every_sdk_package_is_in_the_distribution() -> None:
    """``pip install ./sdk`` ships the packages sdk/pyproject.toml lists: each one must be there."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "sdk" / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "sdk").rglob("__init__.py")
        if "build" not in init.parts
    }
    assert found == listed
