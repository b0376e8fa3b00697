"""The SDK's wheel, built as a user builds it (``pip wheel ./sdk --no-deps``) from a copy of
the source, so the build leaves nothing in the checkout: it is typed (``py.typed``), holds
every module of the SDK, and no demo (the dev server's demo worker needs ``examples``,
which only a checkout has)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import ROOT

SDK = ROOT / "sdk"
LEFT_OUT = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__")


def built_wheel(tmp_path: Path) -> dict[str, bytes]:
    """The files of the wheel ``pip wheel`` builds from a copy of ``sdk/``, by name."""
    source, out = tmp_path / "sdk", tmp_path / "wheels"
    shutil.copytree(SDK, source, ignore=LEFT_OUT)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("chronicle_sdk-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def sdk_modules() -> set[str]:
    """Every module of the SDK's source, as the wheel names it (``sdk/...``)."""
    return {
        f"sdk/{path.relative_to(SDK).as_posix()}"
        for path in SDK.rglob("*.py")
        if not {"build", "dist", "__pycache__"} & set(path.relative_to(SDK).parts)
    }


def test_the_wheel_is_typed_complete_and_holds_no_demo(tmp_path: Path) -> None:
    names = built_wheel(tmp_path)
    assert "sdk/py.typed" in names
    assert not [name for name in names if "demo" in name], "the demo worker belongs to the dev server"
    missing = sdk_modules() - set(names)
    assert not missing, f"modules left out of the wheel (add their packages to sdk/pyproject.toml): {missing}"
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "chronicle = sdk.cli.main:main" in names[entry_points].decode()
