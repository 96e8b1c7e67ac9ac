"""Which tenants a dashboard user may see and act on, and the filter every page, fragment,
download and action applies (DESIGN.md section 6.6).

A user's own ``DashboardScope`` row, when there is one, is their scope; otherwise it is the
union of their groups' rows (so a person can be narrowed below what their role group sees); a
row with ``all_tenants`` opens every tenant; superusers see every tenant; a user with no row of
their own and none through a group sees nothing (fail closed). A run, case or approval outside the
scope is answered exactly like one that does not exist (404), so the dashboard never confirms that
another tenant's run exists.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Model, Q, QuerySet

from review.models import DashboardScope
from runtime.errors import ReviewCaseNotFoundError, RunNotFoundError
from runtime.models import ReviewCase, Run

M = TypeVar("M", bound=Model)


class AllTenants:
    """The scope that holds every tenant (one instance: :data:`ALL`)."""

    def __repr__(self) -> str:
        return "ALL"

    def __reduce__(self) -> str:
        return "ALL"


ALL: Final = AllTenants()
Scope = frozenset[str] | AllTenants
"""What :func:`scope_tenants` returns: the tenant ids a user may see, or :data:`ALL`."""

_CACHED = "_ratchet_dashboard_scope"


def scope_tenants(*, user: Any) -> Scope:
    """The tenants ``user`` may see on the dashboard (DESIGN.md section 6.6).

    Args:
        user: a Django user (``request.user``); anonymous or inactive users get no tenant.

    Returns:
        :data:`ALL`, or a frozenset of tenant id strings (empty: the user sees nothing). The
        user's own row wins over their groups' rows. Read once per user object (one query) and
        kept on it for the rest of the request.
    """
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return frozenset()
    if user.is_superuser:
        return ALL
    cached = getattr(user, _CACHED, None)
    if cached is not None:
        return cached
    rows = DashboardScope.objects.filter(Q(user_id=user.pk) | Q(group__user=user.pk))
    found = list(rows.values_list("user_id", "all_tenants", "tenant_ids"))
    own = [row for row in found if row[0] is not None]
    tenants: set[str] = set()
    scope: Scope | None = None
    for _, all_tenants, tenant_ids in own or found:
        if all_tenants:
            scope = ALL
            break
        tenants.update(t for t in (tenant_ids or []) if isinstance(t, str) and t)
    if scope is None:
        scope = frozenset(tenants)
    setattr(user, _CACHED, scope)
    return scope


def scope_filter(*, user: Any, queryset: QuerySet[M], field: str = "tenant_id") -> QuerySet[M]:
    """``queryset`` narrowed to the rows of tenants ``user`` may see (DESIGN.md section 6.6).

    Args:
        user: a Django user.
        queryset: any queryset whose rows carry a tenant id at ``field``.
        field: the lookup path to the tenant id, e.g. ``"tenant_id"`` for runs, ``"run__tenant_id"``
            for review cases and trace events.

    Returns:
        the same queryset for :data:`ALL`; ``queryset.none()`` for an empty scope; else filtered
        by ``field__in``.
    """
    scope = scope_tenants(user=user)
    if isinstance(scope, AllTenants):
        return queryset
    if not scope:
        return queryset.none()
    return queryset.filter(**{f"{field}__in": sorted(scope)})


def scope_sees_all(*, user: Any) -> bool:
    """Whether ``user`` sees every tenant (superuser, or an all-tenants row). Pages use it to
    add the ``?run=`` a scoped user needs on attachment links (DESIGN.md section 6.6)."""
    return isinstance(scope_tenants(user=user), AllTenants)


def scope_allows(*, user: Any, tenant_id: str) -> bool:
    """Whether ``user`` may see tenant ``tenant_id`` (DESIGN.md section 6.6)."""
    scope = scope_tenants(user=user)
    return isinstance(scope, AllTenants) or tenant_id in scope


def scope_run_check(*, user: Any, run_id: str) -> None:
    """Refuse a run the user may not see as if it did not exist (DESIGN.md section 6.6).

    Raises:
        RunNotFoundError: no such run, or its tenant is outside the user's scope (one query).
    """
    if not scope_filter(user=user, queryset=Run.objects.filter(run_id=run_id)).exists():
        raise RunNotFoundError(run_id=run_id)


def scope_case_check(*, user: Any, case_id: str) -> None:
    """Refuse a review case of a run the user may not see as if it did not exist (DESIGN.md
    section 6.6).

    Raises:
        ReviewCaseNotFoundError: no such case, or its run's tenant is outside the scope.
    """
    cases = ReviewCase.objects.filter(case_id=case_id)
    if not scope_filter(user=user, queryset=cases, field="run__tenant_id").exists():
        raise ReviewCaseNotFoundError(case_id=case_id)


def scope_set(*, user: Any = None, group: Group | None = None, tenant_ids: list[str] | None = None,
              all_tenants: bool = False) -> DashboardScope:
    """Set the scope of one user or one group (exactly one), replacing its row (DESIGN.md
    section 6.6).

    Args:
        user: a Django user, or ``None`` when ``group`` is given.
        group: a Django group, or ``None`` when ``user`` is given.
        tenant_ids: the tenant ids it may see (duplicates and blanks dropped, sorted).
        all_tenants: every tenant (``tenant_ids`` is then ignored).

    Raises:
        ValueError: neither or both of ``user`` and ``group`` were given.
    """
    if (user is None) == (group is None):
        raise ValueError("give exactly one of user and group")
    tenants = [] if all_tenants else sorted({t.strip() for t in tenant_ids or [] if t.strip()})
    with transaction.atomic():
        row, _ = DashboardScope.objects.update_or_create(
            user=user, group=group, defaults={"all_tenants": all_tenants, "tenant_ids": tenants}
        )
    if user is not None and hasattr(user, _CACHED):
        delattr(user, _CACHED)
    return row


def scope_clear(*, user: Any = None, group: Group | None = None) -> int:
    """Delete the scope row of one user or one group; returns how many rows were deleted (0 or
    1). A user left with no row and no group row sees nothing (DESIGN.md section 6.6)."""
    if (user is None) == (group is None):
        raise ValueError("give exactly one of user and group")
    deleted, _ = DashboardScope.objects.filter(user=user, group=group).delete()
    if user is not None and hasattr(user, _CACHED):
        delattr(user, _CACHED)
    return deleted
