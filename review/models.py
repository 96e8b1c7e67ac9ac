"""Dashboard models: the role permissions and the login throttle.

The dashboard never writes runtime tables (DESIGN.md section 2); the only rows it writes are its
own: ``LoginThrottle`` counters (and Django's sessions).
"""

from __future__ import annotations

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
