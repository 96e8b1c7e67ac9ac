"""The three dashboard roles as Django groups (issue: "Roles").

* ``operator``: read runs and health; approve, deny, refresh approvals, cancel runs.
* ``reviewer``: read runs and health; decide review cases.
* ``admin``: everything above, plus the trace evidence browser and read-only access to the
  runtime tables in the Django admin (every ``runtime.view_*`` permission). Members still need
  ``is_staff`` to enter the Django admin; the admin never allows changes to runtime rows.

``roles_sync`` makes each group hold exactly these permissions, so roles are defined here, in
code, and re-running it undoes hand edits.
"""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission
from django.db import transaction

from review.permissions import Perm
from runtime.errors import RoleSetupError

OPERATOR, REVIEWER, ADMIN = "operator", "reviewer", "admin"

ROLE_PERMS: dict[str, frozenset[Perm]] = {
    OPERATOR: frozenset(
        {
            Perm.VIEW_RUNS,
            Perm.APPROVE_ACTION,
            Perm.DENY_ACTION,
            Perm.REFRESH_APPROVAL,
            Perm.CANCEL_RUN,
        }
    ),
    REVIEWER: frozenset({Perm.VIEW_RUNS, Perm.DECIDE_CASE}),
    ADMIN: frozenset(Perm),
}


def roles_sync() -> dict[str, list[str]]:
    """Create or update the three groups so each holds exactly its permissions.

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
    )
    result: dict[str, list[str]] = {}
    with transaction.atomic():
        for name, perms in ROLE_PERMS.items():
            group, _ = Group.objects.get_or_create(name=name)
            wanted = [review_perms[p.codename] for p in perms]
            if name == ADMIN:
                wanted += runtime_view
            group.permissions.set(wanted)
            result[name] = sorted(
                f"{p.content_type.app_label}.{p.codename}"
                for p in group.permissions.select_related("content_type")
            )
    return result
