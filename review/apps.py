"""The ``review`` app configuration; wires the notifications into the runtime's trace and metrics."""

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Ratchet review"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The runtime never imports this app; the app registers what the runtime calls back
        # (DESIGN.md section 6.10).
        from review.notifications.hooks import notifications_wire

        notifications_wire()
