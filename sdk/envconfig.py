"""Where a client's connection comes from, with Temporal's ``envconfig`` names.

``ClientConfig.load_client_connect_config()`` returns the keyword arguments of
``Client.connect`` (``target_host``, ``namespace``, ``api_key``), each taken from the first
of these that sets it:

1. environment variables: ``CHRONICLE_URL`` (or ``CHRONICLE_ADDRESS``), ``CHRONICLE_NAMESPACE``,
   ``CHRONICLE_API_KEY``, then Temporal's ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
   ``TEMPORAL_API_KEY``;
2. a TOML profile: ``[profile.<name>]`` with ``address``, ``namespace``, ``api_key`` (and
   ``[profile.<name>.grpc_meta]``), from ``CHRONICLE_CONFIG_FILE`` / ``TEMPORAL_CONFIG_FILE``
   or ``~/.config/chronicle/chronicle.toml``; the profile is ``CHRONICLE_PROFILE`` /
   ``TEMPORAL_PROFILE`` or ``default``;
3. ``.chronicle/dev.json``, which ``make run`` writes, found from the working directory upward.

``Client.connect`` applies the same chain beneath the arguments it is given, so
``Client.connect()`` alone reaches the dev server.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

DEV_JSON = Path(".chronicle") / "dev.json"
# A TOML config: a file's path, or the TOML text itself (Temporal's DataSource).
DataSource = Path | str | bytes
DEFAULT_PROFILE = "default"
FIELDS = ("target_host", "namespace", "api_key")
ENV_NAMES: dict[str, tuple[str, ...]] = {
    "target_host": ("CHRONICLE_URL", "CHRONICLE_ADDRESS", "TEMPORAL_ADDRESS"),
    "namespace": ("CHRONICLE_NAMESPACE", "TEMPORAL_NAMESPACE"),
    "api_key": ("CHRONICLE_API_KEY", "TEMPORAL_API_KEY"),
}


class ClientConnectConfig(TypedDict, total=False):
    """Keyword arguments for ``Client.connect``."""

    target_host: str
    namespace: str
    api_key: str
    tls: bool
    rpc_metadata: Mapping[str, str]


def _first_env(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((env[name] for name in names if env.get(name)), None)


def config_file_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = _first_env(env, ("CHRONICLE_CONFIG_FILE", "TEMPORAL_CONFIG_FILE"))
    if explicit:
        return Path(explicit)
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "chronicle" / "chronicle.toml"


def find_dev_json(start: Path | None = None) -> Path | None:
    """``.chronicle/dev.json`` in ``start`` (the working directory) or the nearest parent."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEV_JSON
        if candidate.is_file():
            return candidate
    return None


@dataclass(frozen=True)
class ClientConfigTLS:
    """Accepted for Temporal profiles; Chronicle uses TLS when the address is ``https://``."""

    disabled: bool = False
    server_name: str | None = None


@dataclass(frozen=True)
class ClientConfigProfile:
    """One profile: where to connect, which namespace, which key."""

    address: str | None = None
    namespace: str | None = None
    api_key: str | None = None
    tls: ClientConfigTLS | None = None
    grpc_meta: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> ClientConfigProfile:
        tls = data.get("tls")
        return ClientConfigProfile(
            address=data.get("address"),
            namespace=data.get("namespace"),
            api_key=data.get("api_key"),
            tls=ClientConfigTLS(**tls) if isinstance(tls, dict) else None,
            grpc_meta=dict(data.get("grpc_meta") or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        """The profile as its TOML table (unset fields left out)."""
        data: dict[str, Any] = {
            key: value
            for key, value in (
                ("address", self.address),
                ("namespace", self.namespace),
                ("api_key", self.api_key),
            )
            if value
        }
        if self.grpc_meta:
            data["grpc_meta"] = dict(self.grpc_meta)
        return data

    def to_client_connect_config(self) -> ClientConnectConfig:
        config = ClientConnectConfig()
        if self.address:
            config["target_host"] = self.address
        if self.namespace:
            config["namespace"] = self.namespace
        if self.api_key:
            config["api_key"] = self.api_key
        if self.grpc_meta:
            config["rpc_metadata"] = dict(self.grpc_meta)
        return config

    @staticmethod
    def load(
        profile: str | None = None,
        *,
        config_source: DataSource | None = None,
        config_file: str | None = None,
        disable_file: bool = False,
        disable_env: bool = False,
        config_file_strict: bool = False,
        override_env_vars: Mapping[str, str] | None = None,
    ) -> ClientConfigProfile:
        """The profile with environment variables applied over it (Temporal's precedence)."""
        env = dict(os.environ if override_env_vars is None else override_env_vars)
        name = profile or _first_env(env, ("CHRONICLE_PROFILE", "TEMPORAL_PROFILE")) or DEFAULT_PROFILE
        found = ClientConfigProfile()
        if not disable_file:
            loaded = ClientConfig.load(
                config_source=config_source, config_file=config_file, override_env_vars=env
            )
            profiles = loaded.profiles
            if config_file_strict and name not in profiles:
                raise ValueError(f"profile {name!r} not found in the config file")
            found = profiles.get(name, found)
        if disable_env:
            return found
        return ClientConfigProfile(
            address=_first_env(env, ENV_NAMES["target_host"]) or found.address,
            namespace=_first_env(env, ENV_NAMES["namespace"]) or found.namespace,
            api_key=_first_env(env, ENV_NAMES["api_key"]) or found.api_key,
            tls=found.tls,
            grpc_meta=found.grpc_meta,
        )


@dataclass(frozen=True)
class ClientConfig:
    """Every profile of a TOML config file."""

    profiles: Mapping[str, ClientConfigProfile] = field(default_factory=dict)

    @staticmethod
    def load(
        *,
        config_source: DataSource | None = None,
        config_file: str | None = None,
        config_file_strict: bool = False,
        override_env_vars: Mapping[str, str] | None = None,
    ) -> ClientConfig:
        """Every profile of the TOML ``config_source`` (a ``Path``, or the TOML text itself),
        or of ``config_file``, or of the default file (none there: no profiles)."""
        if isinstance(config_source, str | bytes):
            text = config_source.decode() if isinstance(config_source, bytes) else config_source
        else:
            path = config_source or (
                Path(config_file) if config_file else config_file_path(override_env_vars)
            )
            if not path.is_file():
                return ClientConfig()
            text = path.read_text(encoding="utf-8")
        return ClientConfig.from_dict(tomllib.loads(text).get("profile") or {})

    @staticmethod
    def from_dict(profiles: Mapping[str, Mapping[str, Any]]) -> ClientConfig:
        return ClientConfig({name: ClientConfigProfile.from_dict(body) for name, body in profiles.items()})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: profile.to_dict() for name, profile in self.profiles.items()}

    @staticmethod
    def load_client_connect_config(
        profile: str | None = None,
        *,
        config_source: DataSource | None = None,
        config_file: str | None = None,
        disable_file: bool = False,
        disable_env: bool = False,
        config_file_strict: bool = False,
        override_env_vars: Mapping[str, str] | None = None,
    ) -> ClientConnectConfig:
        """``Client.connect``'s keyword arguments: environment, then the profile, then dev.json."""
        config = ClientConfigProfile.load(
            profile,
            config_source=config_source,
            config_file=config_file,
            disable_file=disable_file,
            disable_env=disable_env,
            config_file_strict=config_file_strict,
            override_env_vars=override_env_vars,
        ).to_client_connect_config()
        if not disable_file:
            for key, value in dev_server_config().items():
                config.setdefault(key, value)  # type: ignore[misc]
        return config


def dev_server_config(start: Path | None = None) -> dict[str, str]:
    """What ``.chronicle/dev.json`` says (the dev server ``make run`` started), or nothing."""
    path = find_dev_json(start)
    if path is None:
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    names = {"url": "target_host", "namespace": "namespace", "api_key": "api_key"}
    return {target: str(data[source]) for source, target in names.items() if data.get(source)}


def resolve_connection(
    target_host: str | None, namespace: str | None, api_key: str | None
) -> tuple[str, str, str | None]:
    """Explicit arguments first, then the chain of ``load_client_connect_config``.

    A namespace and key the chain found for another server are not used for an explicit
    ``target_host``: credentials belong with the address they came with.
    """
    if target_host and namespace and api_key is not None:
        return target_host, namespace, api_key
    loaded = ClientConfig.load_client_connect_config()
    if target_host and loaded.get("target_host") not in (None, target_host):
        loaded = ClientConnectConfig()
    host = target_host or loaded.get("target_host")
    if not host:
        raise ValueError(
            "no server address: pass target_host, set CHRONICLE_URL (or TEMPORAL_ADDRESS), "
            "add a TOML profile, or start the dev server (make run) so .chronicle/dev.json exists"
        )
    return host, namespace or loaded.get("namespace") or "default", api_key or loaded.get("api_key")


def base_url(target_host: str, *, tls: bool | None = None) -> str:
    """An HTTP base URL: ``host:port`` (Temporal's form) gains ``http://``, or ``https://`` with TLS."""
    if "://" in target_host:
        return target_host
    return f"{'https' if tls else 'http'}://{target_host}"


__all__ = [
    "ClientConfig",
    "ClientConfigProfile",
    "ClientConfigTLS",
    "ClientConnectConfig",
    "DataSource",
]
