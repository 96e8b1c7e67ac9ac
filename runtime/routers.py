"""Database routing: the high-water mark may live in its own database (``RATCHET_HWM_DATABASE_URL``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings


def hwm_alias() -> str:
    """The database alias holding ``HighWaterMark`` rows: ``"hwm"`` when configured, else ``"default"``."""
    return "hwm" if "hwm" in settings.DATABASES else "default"


class HighWaterMarkRouter:
    """Send the ``HighWaterMark`` model to :func:`hwm_alias`; everything else stays on default."""

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
