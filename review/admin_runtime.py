"""Read-only Django admin for the runtime tables, within each staff user's tenant scope (DESIGN.md sections 2.1, 6.6).

Runtime rows change only through the runtime's services (commit protocol, leases, trace), so the
admin can look but never add, change or delete, not even for a superuser. Models the runtime adds
later are registered read-only too (the loop at the bottom), so a new table is never editable by
accident.

Every list and every object page is narrowed to the tenants the signed-in user may see, exactly
as the dashboard's pages are (``review.scope``): a row is found through its own ``tenant_id`` or
its run's. A table whose rows name no tenant (attachments, combinations, environments) is shown
only to users who see every tenant, and the high-water marks (in a database of their own, so no
join reaches them) only for runs the user may see. A new table without a tenant therefore starts
hidden from scoped staff: the admin fails closed. Registered by the dashboard app, which owns
who sees what; the runtime app imports nothing from it.
"""

from __future__ import annotations

import json
from typing import Any

from django.apps import apps
from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from review.scope import scope_filter, scope_sees_all
from runtime.models import Attachment, Checkpoint, HighWaterMark, Run, TraceEvent


def tenant_path(model: type[Model]) -> str | None:
    """The lookup from a row of ``model`` to its tenant id, or None when its rows name none."""
    names = {f.name for f in model._meta.get_fields()}
    if "tenant_id" in names:
        return "tenant_id"
    if "run" in names and model._meta.get_field("run").related_model is Run:
        return "run__tenant_id"
    return None


class ReadOnlyAdmin(admin.ModelAdmin):
    """View-only: no add, change or delete permission for anyone, so no bulk delete action; rows
    narrowed to the user's tenant scope (see the module docstring)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if scope_sees_all(user=request.user):
            return queryset
        path = tenant_path(self.model)
        if path is None:
            return queryset.none()
        return scope_filter(user=request.user, queryset=queryset, field=path)

    def _tenantless_for(self, request: HttpRequest) -> bool:
        # A table scoped staff can never see a row of is neither listed nor opened for them.
        return tenant_path(self.model) is None and not scope_sees_all(user=request.user)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return not self._tenantless_for(request) and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return not self._tenantless_for(request) and super().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "run_id",
        "tenant_id",
        "task_id",
        "phase",
        "stop_reason",
        "generation",
        "owner_worker",
        "lease_expires_at",
        "updated_at",
    )
    list_filter = ("phase",)
    search_fields = ("run_id", "tenant_id", "task_id")
    ordering = ("-created_at",)
    show_full_result_count = False


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = (
        "run_id",
        "generation",
        "digest",
        "key_id",
        "schema_version",
        "lease_version",
        "created_at",
    )
    search_fields = ("run__run_id", "digest")
    ordering = ("-id",)
    exclude = ("envelope",)
    readonly_fields = ("envelope_json",)
    show_full_result_count = False

    @admin.display(description="envelope (stored JSON)")
    def envelope_json(self, obj: Checkpoint) -> str:
        raw = bytes(obj.envelope)
        try:
            text = json.dumps(json.loads(raw), indent=2, sort_keys=True)
        except (ValueError, UnicodeDecodeError):
            text = f"<{len(raw)} bytes, not JSON>"
        return format_html('<pre class="readonly">{}</pre>', text[:50_000])


@admin.register(HighWaterMark)
class HighWaterMarkAdmin(ReadOnlyAdmin):
    list_display = (
        "run_id",
        "task_id",
        "environment_instance_id",
        "generation",
        "checkpoint_digest",
        "updated_at",
    )
    search_fields = ("run_id", "task_id")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = admin.ModelAdmin.get_queryset(self, request)
        if scope_sees_all(user=request.user):
            return queryset
        # The marks live in their own database: no join reaches Run, so the ids come first.
        runs = scope_filter(user=request.user, queryset=Run.objects.all()).values_list("run_id", flat=True)
        return queryset.filter(run_id__in=list(runs))

    def _tenantless_for(self, request: HttpRequest) -> bool:
        return False  # narrowed by run id above


@admin.register(TraceEvent)
class TraceEventAdmin(ReadOnlyAdmin):
    list_display = ("run_id", "seq", "event_type", "environment_version", "created_at")
    list_filter = ("event_type",)
    search_fields = ("run__run_id", "event_type")
    ordering = ("-id",)
    show_full_result_count = False


@admin.register(Attachment)
class AttachmentAdmin(ReadOnlyAdmin):
    list_display = ("digest", "size", "content_type", "created_at")
    search_fields = ("digest",)


for _model in apps.get_app_config("runtime").get_models():
    if not admin.site.is_registered(_model):
        admin.site.register(_model, ReadOnlyAdmin)
