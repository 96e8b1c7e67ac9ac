"""Read-only Django admin for the runtime tables (DESIGN.md section 2.1).

Runtime rows change only through the runtime's services (commit protocol, leases, trace), so the
admin can look but never add, change or delete, not even for a superuser. Models the runtime adds
later are registered read-only too (the loop at the bottom), so a new table is never editable by
accident.
"""

from __future__ import annotations

import json
from typing import Any

from django.apps import apps
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from runtime.models import Attachment, Checkpoint, HighWaterMark, Run, TraceEvent


class ReadOnlyAdmin(admin.ModelAdmin):
    """View-only: no add, change or delete permission for anyone, so no bulk delete action."""

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
