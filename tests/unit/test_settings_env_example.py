"""platform/env.example lists exactly the environment variables the server reads, each with
its meaning and default; the settings' refusals name the variable to set."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from chronicle.production import DEVELOPMENT_SECRET_KEY, require_safe_debug, secret_key

ROOT = Path(__file__).resolve().parents[2]
ENV_EXAMPLE = ROOT / "platform" / "env.example"
# The files that read the environment for the server: the settings, gunicorn's config and
# the ASGI entry point.
READERS = [
    ROOT / "chronicle" / "settings.py",
    ROOT / "platform" / "gunicorn.conf.py",
    ROOT / "chronicle" / "asgi.py",
]
NOT_CONFIGURATION = {"DJANGO_SETTINGS_MODULE"}  # which settings module, not a setting
_LINE = re.compile(r"^#?\s*([A-Z][A-Z0-9_]+)=")


def variables_read(path: Path) -> set[str]:
    """Names passed as the first argument to ``env.<type>(...)``/``env(...)`` or read with
    ``os.environ.get``/``os.environ.setdefault``/``os.environ[...]``/``os.getenv``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            text = ast.unparse(node.func)
            if (
                text == "env"
                or text.startswith("env.")
                or text in {"os.environ.get", "os.environ.setdefault", "os.getenv"}
            ):
                names.add(str(node.args[0].value))
        is_item = isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ"
        if is_item and isinstance(node.slice, ast.Constant):
            names.add(str(node.slice.value))
    return names - NOT_CONFIGURATION


def documented() -> dict[str, str]:
    """Each variable of env.example with the comment block above it."""
    found: dict[str, str] = {}
    comment: list[str] = []
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        match = _LINE.match(line)
        if match:
            found[match.group(1)] = " ".join(comment)
        elif line.startswith("#"):
            comment.append(line.lstrip("# "))
        else:
            comment = []
    return found


def test_env_example_lists_every_variable_the_server_reads_and_no_other() -> None:
    read = set().union(*(variables_read(path) for path in READERS))
    listed = set(documented())
    assert len(read) > 30  # the scan found the settings' reads
    assert sorted(read - listed) == [], "read but not in platform/env.example"
    assert sorted(listed - read) == [], "in platform/env.example but read nowhere"


def test_every_listed_variable_says_what_it_means_and_its_default() -> None:
    for name, comment in documented().items():
        assert len(comment) > 20, f"{name} has no explanation"
        assert "default" in comment.lower(), f"{name} does not give its default"


def test_no_secret_key_with_debug_off_refuses_naming_the_variable() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"^SECRET_KEY is not set") as refused:
        secret_key("", debug=False)
    assert "platform/env.example" in str(refused.value) and ".chronicle/secret_key" in str(refused.value)


def test_a_configured_key_wins_and_debug_allows_the_development_key() -> None:
    assert secret_key("k" * 60, debug=False) == "k" * 60
    assert secret_key("k" * 60, debug=True) == "k" * 60
    assert secret_key("", debug=True) == DEVELOPMENT_SECRET_KEY


def test_debug_with_a_public_host_is_refused_and_with_local_hosts_allowed() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"CHRONICLE_DEBUG.*chronicle\.example\.com"):
        require_safe_debug(True, ["127.0.0.1", "chronicle.example.com"])
    require_safe_debug(True, ["127.0.0.1", "localhost", "testserver"])
    require_safe_debug(False, ["chronicle.example.com"])
