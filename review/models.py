"""Dashboard models: the role permissions and the login throttle.

The dashboard never writes runtime tables (DESIGN.md section 2); the only rows it writes are its
own: ``LoginThrottle`` counters, ``DashboardScope`` rows (and Django's sessions).
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
            ("cancel_run", "Can cancel a run"),
            ("decide_case", "Can decide a review case (replan or abort)"),
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


class LoginThrottle(models.Model):
    """Failed sign-in counter for one username or one client address.

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
