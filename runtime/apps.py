"""The ``runtime`` app configuration; registers the safety system checks."""

from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "runtime"
    label = "runtime"
    verbose_name = "Ratchet runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runtime import checks  # noqa: F401  (registers system checks)
