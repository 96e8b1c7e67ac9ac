"""The ``review`` app configuration."""

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Ratchet review"
    default_auto_field = "django.db.models.BigAutoField"
