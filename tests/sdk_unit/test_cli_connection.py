"""Where ``chronicle`` connects: flags, then environment, then the TOML profile, then
``.chronicle/dev.json`` (``sdk.envconfig``'s chain), without a server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sdk.cli.connection import Connection, Options, resolve
from sdk.cli.errors import CliError, ExitCode

PROFILE = """
[profile.default]
address = "127.0.0.1:7001"
namespace = "from-file"
api_key = "file-key"

[profile.staging]
address = "https://staging.example:443"
namespace = "stage"
api_key = "stage-key"
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No CHRONICLE_/TEMPORAL_ variables, a config file of two profiles, a cwd with no dev.json."""
    for name in list(os.environ):
        if name.startswith(("CHRONICLE_", "TEMPORAL_")):
            monkeypatch.delenv(name)
    config = tmp_path / "chronicle.toml"
    config.write_text(PROFILE)
    monkeypatch.setenv("CHRONICLE_CONFIG_FILE", str(config))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_the_default_profile_then_the_environment_then_flags(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert resolve(Options()) == Connection("http://127.0.0.1:7001", "from-file", "file-key")
    monkeypatch.setenv("CHRONICLE_NAMESPACE", "from-env")
    assert resolve(Options()).namespace == "from-env"
    assert resolve(Options(namespace="from-flag")).namespace == "from-flag"
    assert resolve(Options(profile="staging")) == Connection(
        "https://staging.example:443", "from-env", "stage-key"
    )


def test_an_explicit_address_does_not_take_another_servers_key(home: Path) -> None:
    other = resolve(Options(address="http://10.0.0.5:8000"))
    assert other == Connection("http://10.0.0.5:8000", "default", None)
    same = resolve(Options(address="127.0.0.1:7001"))
    assert same.api_key == "file-key"


def test_an_unknown_profile_is_a_usage_error(home: Path) -> None:
    with pytest.raises(CliError) as caught:
        resolve(Options(profile="prod"))
    assert caught.value.exit_code == ExitCode.USAGE and "prod" in caught.value.message


def test_dev_json_when_nothing_else_says(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHRONICLE_CONFIG_FILE", str(home / "none.toml"))
    with pytest.raises(CliError) as caught:
        resolve(Options())
    assert caught.value.exit_code == ExitCode.USAGE and "no server address" in caught.value.message
    (home / ".chronicle").mkdir()
    (home / ".chronicle" / "dev.json").write_text(
        json.dumps({"url": "http://127.0.0.1:8123", "namespace": "default", "api_key": "dev-key"})
    )
    assert resolve(Options()) == Connection("http://127.0.0.1:8123", "default", "dev-key")
