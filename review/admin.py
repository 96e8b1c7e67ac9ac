"""Admin for the dashboard's own rows: sign-in lockouts can be viewed and lifted (deleted)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from review.models import LoginThrottle


@admin.register(LoginThrottle)
class LoginThrottleAdmin(admin.ModelAdmin):
    """Deleting a row lifts its lockout; counters are never edited by hand."""

    list_display = ("key", "kind", "failures", "window_started_at", "locked_until")
    list_filter = ("kind",)
    ordering = ("-locked_until",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
