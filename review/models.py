"""Dashboard models: the role permissions and the login throttle.

The dashboard never writes runtime tables (DESIGN.md section 2); the only rows it writes are its
own: ``LoginThrottle`` counters, ``DashboardScope`` rows, notification subscriptions and
their delivery log (and Django's sessions).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models


class Dashboard(models.Model):
    """Holder of the dashboard's custom permissions; it has no table (``managed = False``).

    Permissions are granted through the three groups that ``manage.py ratchet_roles`` creates
    (``review.roles``); every view checks one of them (``review.permissions.require_perm``).
    """

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_runs", "Can read the runs list, run detail, attachments and health"),
            ("view_trace", "Can browse trace evidence across runs"),
            ("approve_action", "Can approve a pending action"),
            ("deny_action", "Can deny a pending action"),
            ("refresh_approval", "Can refresh an expired approval"),
            ("amend_action", "Can amend a pending action's arguments before approving it"),
            ("cancel_run", "Can cancel a run"),
            ("decide_case", "Can decide a review case (replan or abort)"),
            ("restart_run", "Can resume a run stopped for an infrastructure reason, or run a failed run again"),
        ]


class DashboardScope(models.Model):
    """The tenants one user or one group may see and act on in the dashboard (DESIGN.md section
    6.6).

    Exactly one of ``user`` and ``group`` is set. ``tenant_ids`` is a list of tenant id strings;
    ``all_tenants`` opens every tenant (for admins who need it). A user's own row is their scope;
    without one, the union of their groups' rows; with neither they see nothing (superusers see
    every tenant).
    Managed in the Django admin and by ``manage.py ratchet_roles --scope``; read by
    ``review.scope``.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
        related_name="dashboard_scope",
    )
    group = models.OneToOneField(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="dashboard_scope"
    )
    all_tenants = models.BooleanField(default=False)
    tenant_ids = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(user__isnull=False, group__isnull=True)
                    | models.Q(user__isnull=True, group__isnull=False)
                ),
                name="dashboard_scope_user_xor_group",
            )
        ]

    def __str__(self) -> str:
        holder = f"user {self.user}" if self.user_id else f"group {self.group}"
        tenants = "all tenants" if self.all_tenants else ", ".join(self.tenant_ids) or "no tenants"
        return f"{holder}: {tenants}"


class ThrottleKind(models.TextChoices):
    USER = "user", "username"
    IP = "ip", "client address"
    DEVICE = "device", "known device"


class LoginThrottle(models.Model):
    """Failed sign-in counter for one username, one client address or one known device.

    ``key`` is the SHA-256 hex of ``"<kind>:<value>"`` so the table never holds what people typed
    into the username box (sometimes a password). Windows and lockouts are in seconds, configured
    by ``RATCHET_LOGIN_*`` settings; see ``review.throttle``.
    """

    key = models.CharField(max_length=64, primary_key=True)
    kind = models.CharField(max_length=8, choices=ThrottleKind.choices)
    failures = models.PositiveIntegerField(default=0)
    window_started_at = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.kind} throttle {self.key[:12]} ({self.failures} failures)"


class Passkey(models.Model):
    """A reviewer's registered WebAuthn credential (DESIGN.md section 6.9).

    ``public_key`` is the COSE public key the authenticator returned at registration; it is
    copied into every decision signed with this passkey, so a bundle verifies offline.
    ``sign_count`` is the authenticator's counter, checked to go up on every assertion. The
    private key never leaves the reviewer's authenticator.
    """

    # The username, not a foreign key: decisions name reviewers by username, and this app's
    # migrations do not depend on ``auth``'s (the migration graph is shared).
    reviewer = models.CharField(max_length=150, db_index=True)
    credential_id = models.BinaryField(max_length=1023, unique=True)
    public_key = models.BinaryField(max_length=4096)
    sign_count = models.PositiveBigIntegerField(default=0)
    name = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"passkey {self.pk} of {self.reviewer}"


# Notifications (DESIGN.md section 6.10): who is told what, and every delivery attempt.


class NotificationKind(models.TextChoices):
    """What happened to a run that someone may want to hear about (DESIGN.md section 6.10)."""

    APPROVAL_WAITING = "approval_waiting", "Approval waiting"
    APPROVAL_EXPIRING = "approval_expiring", "Approval expiring soon"
    APPROVAL_EXPIRED = "approval_expired", "Approval expired"
    CASE_OPENED = "case_opened", "Review case opened"
    RUN_FROZEN = "run_frozen", "Run frozen"
    RUN_FAILED = "run_failed", "Run failed"


class ChannelKind(models.TextChoices):
    """How an endpoint is reached: a signed webhook, an e-mail address, or any apprise URL."""

    WEBHOOK = "webhook", "Signed webhook"
    EMAIL = "email", "E-mail"
    APPRISE = "apprise", "Apprise URL (Slack, Teams, Matrix, ...)"


class NotificationEndpoint(models.Model):
    """One subscription: where to send which kinds of events, owned by one user or one group.

    Exactly one of ``user`` and ``group`` is set; the owner's dashboard scope (``review.scope``)
    bounds which tenants' events it receives. ``secret`` signs webhook bodies (Standard Webhooks,
    ``whsec_`` + base64); it is shown to the owner, never logged.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="notification_endpoints")
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="notification_endpoints")
    name = models.CharField(max_length=100)
    channel = models.CharField(max_length=16, choices=ChannelKind.choices)
    target = models.CharField(max_length=2000)
    secret = models.CharField(max_length=100, blank=True, default="")
    kinds = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(user__isnull=False, group__isnull=True)
                           | models.Q(user__isnull=True, group__isnull=False)),
                name="notification_endpoint_one_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.channel})"


class NotificationEvent(models.Model):
    """One occurrence worth telling people about, recorded once (``source`` is unique)."""

    kind = models.CharField(max_length=32, choices=NotificationKind.choices)
    source = models.CharField(max_length=300, unique=True)
    run_id = models.CharField(max_length=64, db_index=True)
    tenant_id = models.CharField(max_length=200)
    task_id = models.CharField(max_length=200, blank=True, default="")
    case_id = models.CharField(max_length=64, blank=True, default="")
    summary = models.CharField(max_length=500, blank=True, default="")
    path = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.run_id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    RETRYING = "retrying", "Retrying"
    GAVE_UP = "gave_up", "Gave up"
    CANCELLED = "cancelled", "Cancelled (endpoint switched off, or its owner may no longer see the tenant)"


class NotificationDelivery(models.Model):
    """One event to one endpoint; retried with backoff until delivered or out of attempts."""

    event = models.ForeignKey(NotificationEvent, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(NotificationEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["event", "endpoint"], name="notification_delivery_once")]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notification_delivery_due")]

    def __str__(self) -> str:
        return f"delivery {self.pk} ({self.status})"


class DeliveryAttempt(models.Model):
    """One try of one delivery, kept for the admins: when, how long, and what came back."""

    delivery = models.ForeignKey(NotificationDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    ok = models.BooleanField(default=False)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="delivery_attempt_once")]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"
