"""Admin for the dashboard's own rows: sign-in lockouts can be viewed and lifted (deleted), and
the tenants each user or group may see on the dashboard are edited (DESIGN.md section 6.6)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from review import admin_notifications, admin_runtime  # noqa: F401  (register the notification and runtime tables)
from review.models import DashboardScope, LoginThrottle


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


class DashboardScopeForm(forms.ModelForm):
    """Tenant ids one per line instead of a JSON list."""

    tenants = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}), required=False,
        help_text="One tenant id per line. Ignored when 'all tenants' is ticked.",
    )

    class Meta:
        model = DashboardScope
        fields = ("user", "group", "all_tenants")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["tenants"].initial = "\n".join(self.instance.tenant_ids or [])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if bool(data.get("user")) == bool(data.get("group")):
            raise forms.ValidationError("Choose exactly one: a user or a group.")
        tenants = sorted({line.strip() for line in data.get("tenants", "").splitlines()
                          if line.strip()})
        if any(len(t) > 200 for t in tenants):
            raise forms.ValidationError("A tenant id is at most 200 characters.")
        self.instance.tenant_ids = [] if data.get("all_tenants") else tenants
        return data


@admin.register(DashboardScope)
class DashboardScopeAdmin(admin.ModelAdmin):
    """Who sees which tenants. A user's own row is their scope, else their groups' rows; a user
    with neither sees nothing (superusers see every tenant)."""

    form = DashboardScopeForm
    list_display = ("__str__", "all_tenants", "updated_at")
    list_filter = ("all_tenants",)
    raw_id_fields = ("user",)
