"""Ratchet's Django project package and durable runtime app.

The Celery app is loaded lazily (``runtime.celery_app``, or ``RuntimeConfig.ready()`` in Django
processes) so that importing the framework-free ``runtime.core`` does not drag in Celery and
Django (DESIGN.md section 2). ``celery -A runtime`` still finds ``runtime.project.celery.app``.
"""

from __future__ import annotations

from typing import Any

__all__ = ("celery_app",)


def __getattr__(name: str) -> Any:
    # ``app``: what ``celery -A runtime`` looks for first, now that the app lives in runtime.project.
    if name in ("celery_app", "app"):
        from runtime.project.celery import app

        return app
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
