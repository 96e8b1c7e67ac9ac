"""Who is subscribed to what, and who may hear of an event (DESIGN.md section 6.10).

An endpoint (``NotificationEndpoint``) belongs to one user or one group and lists the kinds of
event it wants. An event of tenant T reaches a user's endpoint only when the user is active, may
read runs (``review.view_runs``) and T is in their dashboard scope (``review.scope``); a group's
endpoint only when the group holds ``view_runs`` and its own scope row holds T. A group without
a scope row hears nothing (fail closed, as its members would see nothing).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator
from django.db import transaction

from review.models import ChannelKind, DashboardScope, NotificationEndpoint, NotificationKind
from review.notifications.signing import webhook_secret_new
from review.permissions import Perm
from review.scope import scope_allows
from runtime.errors import NotificationEndpointError

VIEW_RUNS_CODENAME = Perm.VIEW_RUNS.codename


def _target_check(*, channel: str, target: str) -> str:
    target = target.strip()
    if channel == ChannelKind.WEBHOOK:
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise NotificationEndpointError("a webhook needs an http(s) URL", field="target")
    elif channel == ChannelKind.EMAIL:
        try:
            EmailValidator()(target)
        except ValidationError:
            raise NotificationEndpointError("not an e-mail address", field="target") from None
    elif channel == ChannelKind.APPRISE:
        if "://" not in target:
            raise NotificationEndpointError("an apprise URL looks like slack://...", field="target")
    else:
        raise NotificationEndpointError(f"unknown channel {channel!r}", field="channel")
    return target


def _kinds_check(kinds: list[str]) -> list[str]:
    known = set(NotificationKind.values)
    unknown = sorted(set(kinds) - known)
    if unknown:
        raise NotificationEndpointError(f"unknown event kinds {', '.join(unknown)}", field="kinds")
    return sorted(set(kinds))


def endpoint_create(*, name: str, channel: str, target: str, kinds: list[str], user: Any = None,
                    group: Group | None = None) -> NotificationEndpoint:
    """Subscribe one user or one group (exactly one) to ``kinds`` at ``target``.

    Args:
        name: a label for the owner's settings page.
        channel: a ``ChannelKind`` value.
        target: webhook URL, e-mail address or apprise URL, by channel.
        kinds: ``NotificationKind`` values.

    Raises:
        NotificationEndpointError: owner, channel, target or kinds are not acceptable; nothing saved.
    """
    if (user is None) == (group is None):
        raise NotificationEndpointError("give exactly one of user and group", field="owner")
    clean = _target_check(channel=channel, target=target)
    secret = webhook_secret_new() if channel == ChannelKind.WEBHOOK else ""
    with transaction.atomic():
        return NotificationEndpoint.objects.create(
            user=user, group=group, name=name.strip()[:100] or channel, channel=channel, target=clean,
            secret=secret, kinds=_kinds_check(kinds))


def endpoint_update(*, endpoint_id: int, user: Any, kinds: list[str] | None = None,
                    enabled: bool | None = None) -> NotificationEndpoint:
    """Change the kinds or the on/off switch of one of ``user``'s own endpoints.

    Raises:
        NotificationEndpointError: no such endpoint owned by ``user``, or unknown kinds.
    """
    with transaction.atomic():
        endpoint = NotificationEndpoint.objects.select_for_update().filter(pk=endpoint_id, user=user).first()
        if endpoint is None:
            raise NotificationEndpointError(f"no endpoint {endpoint_id} of yours", field="endpoint")
        if kinds is not None:
            endpoint.kinds = _kinds_check(kinds)
        if enabled is not None:
            endpoint.enabled = enabled
        endpoint.save(update_fields=["kinds", "enabled"])
    return endpoint


def endpoint_delete(*, endpoint_id: int, user: Any) -> None:
    """Delete one of ``user``'s own endpoints (its delivery log goes with it).

    Raises:
        NotificationEndpointError: no such endpoint owned by ``user``.
    """
    deleted, _ = NotificationEndpoint.objects.filter(pk=endpoint_id, user=user).delete()
    if not deleted:
        raise NotificationEndpointError(f"no endpoint {endpoint_id} of yours", field="endpoint")


def _group_allows(group: Group, tenant_id: str) -> bool:
    if not group.permissions.filter(codename=VIEW_RUNS_CODENAME, content_type__app_label="review").exists():
        return False
    row = DashboardScope.objects.filter(group=group).first()
    return row is not None and (row.all_tenants or tenant_id in (row.tenant_ids or []))


def _user_allows(user: Any, tenant_id: str) -> bool:
    return bool(user.is_active and user.has_perm(Perm.VIEW_RUNS.value)
                and scope_allows(user=user, tenant_id=tenant_id))


def endpoint_may_hear(*, endpoint: NotificationEndpoint, tenant_id: str) -> bool:
    """Whether ``endpoint`` is on and its owner may see ``tenant_id`` now (checked again before
    every attempt, so a scope narrowed after an event was recorded stops its deliveries)."""
    if not endpoint.enabled:
        return False
    if endpoint.user is not None:
        return _user_allows(endpoint.user, tenant_id)
    return endpoint.group is not None and _group_allows(endpoint.group, tenant_id)


def endpoints_for(*, kind: str, tenant_id: str) -> list[NotificationEndpoint]:
    """The enabled endpoints subscribed to ``kind`` whose owner may see tenant ``tenant_id``
    (DESIGN.md section 6.10); never one outside its owner's scope."""
    out = []
    owners: dict[tuple[str, int], bool] = {}
    for endpoint in NotificationEndpoint.objects.filter(enabled=True).select_related("user", "group"):
        if kind not in (endpoint.kinds or []):
            continue
        if endpoint.user is not None:
            key = ("user", endpoint.user_id)
            if key not in owners:
                owners[key] = _user_allows(endpoint.user, tenant_id)
        else:
            key = ("group", endpoint.group_id)
            if key not in owners:
                owners[key] = _group_allows(endpoint.group, tenant_id)
        if owners[key]:
            out.append(endpoint)
    return out
