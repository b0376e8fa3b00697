#!/usr/bin/env python
"""Django's command-line utility for Chronicle."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chronicle.settings")
    # Before the settings are read: `start_dev`, and commands on the embedded development
    # database, sign with the checkout's own key (.chronicle/secret_key) unless SECRET_KEY is set.
    from chronicle.production import supply_development_key

    supply_development_key(
        sys.argv[1] if len(sys.argv) > 1 else "", os.environ, Path(__file__).resolve().parent
    )
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
