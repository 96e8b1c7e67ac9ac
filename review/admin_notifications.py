"""Admin for the notifications (DESIGN.md section 6.10): endpoints are edited here (a group's
endpoints only here), events, deliveries and every attempt are read-only and narrowed to the
tenants the admin may see (``review.scope``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from review.models import ChannelKind, DeliveryAttempt, NotificationDelivery, NotificationEndpoint, NotificationEvent
from review.notifications.signing import webhook_secret_new
from review.scope import scope_filter


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(NotificationEndpoint)
class NotificationEndpointAdmin(admin.ModelAdmin):
    """A webhook endpoint gets its signing secret when first saved; the secret is never edited."""

    list_display = ("name", "user", "group", "channel", "target_shown", "enabled", "created_at")
    list_filter = ("channel", "enabled")
    readonly_fields = ("created_at",)
    exclude = ("secret",)  # the owner reads it on their Notifications page; admins need not

    @admin.display(description="target")
    def target_shown(self, obj: NotificationEndpoint) -> str:
        """An apprise URL carries the service's token in it: only its scheme is listed."""
        if obj.channel == ChannelKind.APPRISE:
            return obj.target.split("://", 1)[0] + "://…"
        return obj.target

    def save_model(self, request: HttpRequest, obj: NotificationEndpoint, form: Any, change: bool) -> None:
        if obj.channel == ChannelKind.WEBHOOK and not obj.secret:
            obj.secret = webhook_secret_new()
        super().save_model(request, obj, form, change)


@admin.register(NotificationEvent)
class NotificationEventAdmin(_ReadOnly):
    list_display = ("created_at", "kind", "tenant_id", "task_id", "run_id", "case_id", "summary")
    list_filter = ("kind",)
    ordering = ("-created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[NotificationEvent]:
        return scope_filter(user=request.user, queryset=super().get_queryset(request))


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "started_at", "duration_ms", "ok", "status_code", "error")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(_ReadOnly):
    """Each delivery with its attempts: when, how long, the receiver's status code or the error."""

    list_display = ("created_at", "event", "endpoint", "status", "attempts", "next_attempt_at", "last_error")
    list_filter = ("status",)
    ordering = ("-created_at",)
    inlines = (DeliveryAttemptInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[NotificationDelivery]:
        queryset = super().get_queryset(request).select_related("event", "endpoint")
        return scope_filter(user=request.user, queryset=queryset, field="event__tenant_id")


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(_ReadOnly):
    list_display = ("started_at", "delivery", "number", "ok", "status_code", "duration_ms", "error")
    list_filter = ("ok",)
    ordering = ("-started_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[DeliveryAttempt]:
        return scope_filter(user=request.user, queryset=super().get_queryset(request),
                            field="delivery__event__tenant_id")
