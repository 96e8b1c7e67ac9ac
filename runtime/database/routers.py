"""Database routing: the high-water marks live in their own database, the ``hwm`` alias
(DESIGN.md section 4.2; ``runtime.project.settings`` always configures it)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from runtime.errors import ConfigurationError

HWM_ALIAS = "hwm"
"""The database alias of the high-water mark store, always a database of its own (DESIGN.md
section 4.2): the mark is what makes a restore of the main database fail closed."""


def hwm_alias() -> str:
    """The database alias holding ``HighWaterMark`` rows: always :data:`HWM_ALIAS`.

    ``runtime.project.settings`` always configures it, apart from the main database; there is
    no mode that keeps the mark inside the main database's transaction.

    Raises:
        ConfigurationError: the settings in use define no ``hwm`` database.
    """
    if HWM_ALIAS not in settings.DATABASES:
        raise ConfigurationError(
            f"the settings define no {HWM_ALIAS!r} database for the high-water mark store: use "
            "runtime.project.settings (RATCHET_HWM_DATABASE_URL names the store)")
    return HWM_ALIAS


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
