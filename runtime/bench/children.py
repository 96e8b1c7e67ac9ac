"""The ``manage.py`` child processes a bench starts: their command line and environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.conf import settings


def manage_argv(*args: str) -> list[str]:
    """``python manage.py *args`` with this interpreter and the project's ``manage.py``."""
    return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment plus ``extra``; an inherited crash point is dropped, so only a
    child told to crash (``extra``) does."""
    env = {k: v for k, v in os.environ.items() if k != "RATCHET_CRASH_AT"}
    env.update(extra)
    return env
