"""The three dashboard roles as Django groups, defined in code (DESIGN.md section 6.6).

* ``operator``: read runs and health; approve, deny, refresh approvals, amend a waiting write
  before approving it, cancel runs.
* ``reviewer``: read runs and health; decide review cases.
* ``admin``: everything above, plus the trace evidence browser and read-only access to the
  runtime tables in the Django admin (every ``runtime.view_*`` permission). Members still need
  ``is_staff`` to enter the Django admin; the admin never allows changes to runtime rows. The
  admin role also reads the notification endpoints, events, deliveries and attempts there.

``roles_sync`` makes each group hold exactly these permissions, so roles are defined here, in
code, and re-running it undoes hand edits.

Tenants are a second dimension (``review.scope``, DESIGN.md section 6.6): a group that
``roles_sync`` *creates* gets an all-tenants scope row when ``all_tenants_for_new_groups`` (the
default: the demo, the tests and one-tenant installs keep working); ``manage.py ratchet_roles``
passes False unless told otherwise, so a production install fails closed until people or groups
are scoped. Scope rows of existing groups are never touched by a re-run.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth.models import Group, Permission
from django.db import transaction

from review.models import DashboardScope
from review.permissions import Perm
from review.scope import scope_set
from runtime.errors import RoleSetupError

OPERATOR, REVIEWER, ADMIN = "operator", "reviewer", "admin"

NOTIFICATION_ADMIN_VIEW = ("view_notificationevent", "view_notificationdelivery", "view_deliveryattempt",
                           "view_notificationendpoint")
"""The admin role reads the notification log in the Django admin (changes stay with superusers)."""

ROLE_PERMS: dict[str, frozenset[Perm]] = {
    OPERATOR: frozenset(
        {
            Perm.VIEW_RUNS,
            Perm.APPROVE_ACTION,
            Perm.DENY_ACTION,
            Perm.REFRESH_APPROVAL,
            Perm.AMEND_ACTION,
            Perm.CANCEL_RUN,
            Perm.RESTART_RUN,
        }
    ),
    REVIEWER: frozenset({Perm.VIEW_RUNS, Perm.DECIDE_CASE}),
    ADMIN: frozenset(Perm),
}


def roles_sync(*, all_tenants_for_new_groups: bool = True) -> dict[str, list[str]]:
    """Create or update the three groups so each holds exactly its permissions.

    Args:
        all_tenants_for_new_groups: a group created by this call also gets an all-tenants
            dashboard scope row (DESIGN.md section 6.6); existing groups keep whatever scope
            they have.

    Returns:
        ``{group name: sorted "app_label.codename" permissions}`` as now stored.

    Raises:
        RoleSetupError: a dashboard permission row is missing (``migrate`` has not run).
    """
    review_perms = {
        p.codename: p for p in Permission.objects.filter(content_type__app_label="review")
    }
    missing = sorted(p.value for p in Perm if p.codename not in review_perms)
    if missing:
        raise RoleSetupError(missing=",".join(missing))
    runtime_view = list(
        Permission.objects.filter(content_type__app_label="runtime", codename__startswith="view_")
    ) + list(  # the notification delivery log, for admins (DESIGN.md section 6.10)
        Permission.objects.filter(content_type__app_label="review", codename__in=NOTIFICATION_ADMIN_VIEW)
    )
    result: dict[str, list[str]] = {}
    with transaction.atomic():
        for name, perms in ROLE_PERMS.items():
            group, created = Group.objects.get_or_create(name=name)
            if created and all_tenants_for_new_groups:
                scope_set(group=group, all_tenants=True)
            wanted = [review_perms[p.codename] for p in perms]
            if name == ADMIN:
                wanted += runtime_view
            group.permissions.set(wanted)
            result[name] = sorted(
                f"{p.content_type.app_label}.{p.codename}"
                for p in group.permissions.select_related("content_type")
            )
    return result


@dataclass(frozen=True)
class DemoLogin:
    """A demo account: ``password`` is the one just set, or ``None`` when an existing account
    was kept as it was (its password is not known here)."""

    username: str
    role: str
    password: str | None


def demo_users_ensure(*, password: str | None = None) -> list[DemoLogin]:
    """Create the demo accounts ``operator``, ``reviewer`` and ``admin``, one per role.

    Args:
        password: set this password on all three (new or existing) accounts. ``None``: new
            accounts get a random password each (returned once, never stored in clear) and
            existing ones are left unchanged.

    The ``admin`` account is also ``is_staff`` so it can open the (read-only) Django admin. Each
    account without a dashboard scope row of its own gets one for all tenants (the demo shows
    every tenant; DESIGN.md section 6.6). Call :func:`roles_sync` first so the groups exist.
    """
    from django.contrib.auth import get_user_model

    users = get_user_model()
    logins = []
    with transaction.atomic():
        for role in (OPERATOR, REVIEWER, ADMIN):
            user, created = users.objects.get_or_create(username=role)
            chosen = password if password is not None else (
                secrets.token_urlsafe(12) if created else None
            )
            if chosen is not None:
                user.set_password(chosen)
            if role == ADMIN:
                user.is_staff = True
            user.save()
            user.groups.add(Group.objects.get(name=role))
            if not DashboardScope.objects.filter(user=user).exists():
                scope_set(user=user, all_tenants=True)
            logins.append(DemoLogin(username=role, role=role, password=chosen))
    return logins
