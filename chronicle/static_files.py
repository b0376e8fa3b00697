"""The frontend serves the UI's and the admin's static files itself: WhiteNoise.

From ``STATIC_ROOT`` once ``collectstatic`` has filled it (the container image does at build
time; the systemd migrate unit on deploy), with compressed copies and long cache headers;
from the apps' own folders before that (``WHITENOISE_USE_FINDERS``, set in the settings
when there is no ``STATIC_ROOT`` yet: development and tests).
"""

from __future__ import annotations

import os
from typing import Any

from whitenoise.middleware import WhiteNoiseMiddleware  # type: ignore[import-untyped]


class StaticFilesMiddleware(WhiteNoiseMiddleware):  # type: ignore[misc]  # whitenoise ships no types
    """WhiteNoise, without its warning about a ``STATIC_ROOT`` not collected yet: the apps'
    folders serve then, so a missing folder is expected, not a misconfiguration."""

    def add_files(self, root: Any, prefix: Any = None) -> None:
        if self.autorefresh or os.path.isdir(root):
            super().add_files(root, prefix)
