"""Database routing: the high-water marks live in their own database, the ``hwm`` alias
(DESIGN.md section 4.2; ``runtime.project.settings`` always configures it)."""

from __future__ import annotations

from typing import Any

from django.conf import settings


def hwm_alias() -> str:
    """The database alias holding ``HighWaterMark`` rows: ``"hwm"`` (always configured by
    ``runtime.project.settings``); ``"default"`` only under settings that define no ``hwm`` alias."""
    return "hwm" if "hwm" in settings.DATABASES else "default"


class HighWaterMarkRouter:
    """Send the ``HighWaterMark`` model to :func:`hwm_alias`; everything else stays on default,
    and the ``hwm`` database holds nothing but the marks (and Django's migration records)."""

    def _is_hwm(self, model: Any) -> bool:
        return model._meta.app_label == "runtime" and model._meta.model_name == "highwatermark"

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return hwm_alias() if self._is_hwm(model) else None

    db_for_write = db_for_read

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        return None

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool | None:
        if "hwm" not in settings.DATABASES:
            return None
        if app_label == "runtime" and model_name == "highwatermark":
            return db == "hwm"
        if db == "hwm":
            return False
        return None
