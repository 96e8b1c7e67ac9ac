"""The ``runtime`` app configuration; registers the safety system checks."""

from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "runtime"
    label = "runtime"
    verbose_name = "Ratchet runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # ``checks`` registers the system checks; importing ``celery`` binds @shared_task to this
        # app, now that runtime/__init__.py loads it lazily (to keep runtime.core Django-free).
        from runtime import checks  # noqa: F401
        from runtime.project import celery  # noqa: F401
