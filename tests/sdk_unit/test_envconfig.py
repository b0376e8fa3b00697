"""Where a client's connection comes from: arguments, environment, TOML profile, dev.json."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from sdk.client import Client
from sdk.envconfig import ClientConfig, ClientConfigProfile

TOML = """
[profile.default]
address = "toml-host:7233"
namespace = "toml-ns"
api_key = "toml-key"

[profile.staging]
address = "https://staging.example:443"
namespace = "staging"

[profile.staging.grpc_meta]
team = "payments"
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with a dev.json two levels up, and no connection variables set."""
    for name in (
        "CHRONICLE_URL",
        "CHRONICLE_ADDRESS",
        "CHRONICLE_NAMESPACE",
        "CHRONICLE_API_KEY",
        "CHRONICLE_PROFILE",
        "CHRONICLE_CONFIG_FILE",
        "TEMPORAL_ADDRESS",
        "TEMPORAL_NAMESPACE",
        "TEMPORAL_API_KEY",
        "TEMPORAL_PROFILE",
        "TEMPORAL_CONFIG_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / ".chronicle").mkdir()
    dev = {"url": "http://127.0.0.1:8123", "namespace": "dev-ns", "api_key": "dev-key"}
    (tmp_path / ".chronicle" / "dev.json").write_text(json.dumps(dev))
    inner = tmp_path / "app" / "src"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    return tmp_path


def _write_toml(root: Path) -> Path:
    path = root / "config" / "chronicle" / "chronicle.toml"
    path.parent.mkdir(parents=True)
    path.write_text(TOML)
    return path


def test_dev_json_is_found_from_the_working_directory_upward(workdir: Path) -> None:
    assert ClientConfig.load_client_connect_config() == {
        "target_host": "http://127.0.0.1:8123",
        "namespace": "dev-ns",
        "api_key": "dev-key",
    }


def test_a_toml_profile_beats_dev_json(workdir: Path) -> None:
    _write_toml(workdir)
    assert ClientConfig.load_client_connect_config() == {
        "target_host": "toml-host:7233",
        "namespace": "toml-ns",
        "api_key": "toml-key",
    }
    staging = ClientConfig.load_client_connect_config("staging", disable_file=False)
    assert staging["target_host"] == "https://staging.example:443"
    assert staging["rpc_metadata"] == {"team": "payments"}
    assert staging["api_key"] == "dev-key"  # the profile has none: the next source fills it
    with pytest.raises(ValueError, match="not found"):
        ClientConfig.load_client_connect_config("missing", config_file_strict=True)


def test_environment_beats_the_profile_and_chronicle_beats_temporal(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_toml(workdir)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal-host:7233")
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "temporal-ns")
    monkeypatch.setenv("CHRONICLE_NAMESPACE", "chronicle-ns")
    config = ClientConfig.load_client_connect_config()
    assert config == {"target_host": "temporal-host:7233", "namespace": "chronicle-ns", "api_key": "toml-key"}
    assert ClientConfig.load_client_connect_config(disable_env=True)["namespace"] == "toml-ns"
    only_env = ClientConfig.load_client_connect_config(disable_file=True)
    assert only_env == {"target_host": "temporal-host:7233", "namespace": "chronicle-ns"}


def test_profile_load_reads_an_explicit_file(workdir: Path) -> None:
    path = _write_toml(workdir)
    profile = ClientConfigProfile.load("staging", config_file=str(path), override_env_vars={})
    assert (profile.address, profile.namespace, profile.api_key) == (
        "https://staging.example:443",
        "staging",
        None,
    )


def test_connect_takes_temporals_names_and_fills_from_the_chain(workdir: Path) -> None:
    async def connect() -> list[tuple[str, str, str | None]]:
        found = []
        for client in (
            await Client.connect(),
            await Client.connect(**ClientConfig.load_client_connect_config()),
            await Client.connect("http://127.0.0.1:8123", namespace="other"),
            await Client.connect(target_host="elsewhere:7233"),
            await Client.connect("elsewhere:7233", namespace="n", api_key="k", tls=True),
        ):
            http = client.transport._client
            found.append((str(http.base_url), client.namespace, http.headers.get("Authorization")))
            await client.close()
        return found

    assert asyncio.run(connect()) == [
        ("http://127.0.0.1:8123/api/v1/namespaces/dev-ns/", "dev-ns", "Bearer dev-key"),
        ("http://127.0.0.1:8123/api/v1/namespaces/dev-ns/", "dev-ns", "Bearer dev-key"),
        ("http://127.0.0.1:8123/api/v1/namespaces/other/", "other", "Bearer dev-key"),
        # Another server than dev.json's: its namespace and key are not used.
        ("http://elsewhere:7233/api/v1/namespaces/default/", "default", None),
        ("https://elsewhere:7233/api/v1/namespaces/n/", "n", "Bearer k"),
    ]


def test_connect_without_any_source_says_where_to_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workdir: Path
) -> None:
    (workdir / ".chronicle" / "dev.json").unlink()
    with pytest.raises(ValueError, match="CHRONICLE_URL"):
        asyncio.run(Client.connect())


def test_config_source_takes_a_path_or_the_toml_itself_and_round_trips(workdir: Path) -> None:
    path = _write_toml(workdir)
    from_path = ClientConfig.load(config_source=path)
    from_text = ClientConfig.load(config_source=TOML)
    assert from_path == from_text == ClientConfig.from_dict(from_text.to_dict())
    staging = ClientConfigProfile.load("staging", config_source=TOML.encode(), override_env_vars={})
    assert staging.to_dict() == {
        "address": "https://staging.example:443",
        "namespace": "staging",
        "grpc_meta": {"team": "payments"},
    }
