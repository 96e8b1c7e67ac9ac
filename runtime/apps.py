"""The ``runtime`` app configuration; registers the safety system checks and starts tracing when configured."""

from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "runtime"
    label = "runtime"
    verbose_name = "Ratchet runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # ``checks`` registers the system checks. The Celery app is not imported here: the project
        # package creates it when its settings load (runtime/project/__init__.py), and the app
        # never imports the project that wires it.
        from runtime import checks  # noqa: F401
        from runtime.telemetry.setup import tracing_start_from_settings

        # Before the middleware chain is built and before a worker forks (DESIGN.md section 8.6).
        tracing_start_from_settings()
