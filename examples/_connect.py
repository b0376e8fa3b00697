"""Connection settings for the examples: ``.chronicle/dev.json`` (written by ``make run``) or env."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sdk.client import Client

DEV_JSON = Path(__file__).resolve().parent.parent / ".chronicle" / "dev.json"
TASK_QUEUE = "demo"


def settings() -> dict[str, str]:
    """CHRONICLE_URL / CHRONICLE_NAMESPACE / CHRONICLE_API_KEY override the dev server's file."""
    found: dict[str, str] = {}
    if DEV_JSON.exists():
        found = {k: str(v) for k, v in json.loads(DEV_JSON.read_text(encoding="utf-8")).items()}
    return {
        "url": os.environ.get("CHRONICLE_URL", found.get("url", "http://127.0.0.1:8000")),
        "namespace": os.environ.get("CHRONICLE_NAMESPACE", found.get("namespace", "default")),
        "api_key": os.environ.get("CHRONICLE_API_KEY", found.get("api_key", "")),
    }


async def connect() -> Client:
    config = settings()
    return await Client.connect(config["url"], namespace=config["namespace"], api_key=config["api_key"])
