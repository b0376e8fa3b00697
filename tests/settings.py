"""The settings of the test suite and the type checker: Chronicle's own, with a key made
for the run.

``chronicle.settings`` refuses to start without ``SECRET_KEY`` (DEBUG off), and
pytest-django reads the settings before any conftest runs, so the key is set here
(:func:`chronicle.launcher.ensure_secret_key`: a random one, unless ``SECRET_KEY`` is
set). The processes a test starts inherit it with the environment, and load
``chronicle.settings`` themselves, as a deployment's processes do.
"""

from __future__ import annotations

import os

from chronicle.launcher import ensure_secret_key

ensure_secret_key()
# pytest-django names this module in the environment; the processes a test starts get the
# project's own settings (a test that removes SECRET_KEY sees them refuse).
os.environ["DJANGO_SETTINGS_MODULE"] = "chronicle.settings"

from chronicle.settings import *  # noqa: E402, F403
