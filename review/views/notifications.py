"""The notification settings page: each user's own endpoints and their groups' (DESIGN.md
section 6.10). Thin: the services are ``review.notifications.subscriptions``.

``GET /notifications/`` is the page (an htmx request for ``#endpoints`` gets only the list);
``POST /notifications/add/`` adds an endpoint (a refused form comes back with its errors and the
input kept, 400) and ``POST /notifications/change/`` switches, re-chooses or deletes one of the
user's own; both answer 303 to the page, or the list fragment for htmx.
Anyone who may read runs may subscribe: what they hear is bounded by their tenant scope.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from review.forms_notifications import EndpointChangeForm, EndpointForm
from review.models import NotificationEndpoint
from review.notifications import subscriptions
from review.permissions import Perm, require_perm
from review.views.common import fragment_requested, page_render, see_other
from runtime.errors import NotificationEndpointError


def _context(request: HttpRequest, form: EndpointForm | None = None) -> dict[str, object]:
    user = request.user
    return {
        "own": NotificationEndpoint.objects.filter(user=user).order_by("created_at"),
        "groups": NotificationEndpoint.objects.filter(group__user=user).select_related("group").order_by("group__name"),
        "form": form or EndpointForm(),
        "change_form": EndpointChangeForm,
    }


def _after(request: HttpRequest) -> HttpResponse:
    if fragment_requested(request):
        return page_render(request, "review/notifications.html", _context(request), fragment="endpoints")
    return see_other(reverse("review:notifications"))


@require_perm(Perm.VIEW_RUNS)
@require_safe
def notifications(request: HttpRequest) -> HttpResponse:
    """The page: the user's endpoints (with each webhook's signing secret), their groups'
    endpoints (read-only: admins manage those in the Django admin) and the form to add one."""
    return page_render(request, "review/notifications.html", _context(request), fragment="endpoints")


@require_perm(Perm.VIEW_RUNS)
@require_POST
def notification_add(request: HttpRequest) -> HttpResponse:
    """Add an endpoint of the signed-in user (a webhook gets a fresh secret)."""
    form = EndpointForm(request.POST)
    if not form.is_valid():
        return page_render(request, "review/notifications.html", _context(request, form), status=400)
    try:
        endpoint = subscriptions.endpoint_create(user=request.user, **form.cleaned_data)
    except NotificationEndpointError as exc:
        form.add_error(None, f"{exc.message}: {exc.hint}")
        return page_render(request, "review/notifications.html", _context(request, form), status=400)
    messages.success(request, f"Endpoint {endpoint.name} added.")
    return _after(request)


@require_perm(Perm.VIEW_RUNS)
@require_POST
def notification_change(request: HttpRequest) -> HttpResponse:
    """Switch, re-choose the events of, or delete one of the signed-in user's endpoints."""
    form = EndpointChangeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing changed: the form was incomplete.")
        return _after(request)
    endpoint_id, change = form.cleaned_data["endpoint_id"], form.cleaned_data["change"]
    try:
        if change == "delete":
            subscriptions.endpoint_delete(endpoint_id=endpoint_id, user=request.user)
            messages.success(request, "Endpoint deleted.")
        elif change == "toggle":
            current = NotificationEndpoint.objects.filter(pk=endpoint_id, user=request.user).first()
            subscriptions.endpoint_update(endpoint_id=endpoint_id, user=request.user,
                                          enabled=not (current is not None and current.enabled))
            messages.success(request, "Endpoint switched.")
        else:
            subscriptions.endpoint_update(endpoint_id=endpoint_id, user=request.user,
                                          kinds=form.cleaned_data["kinds"])
            messages.success(request, "Events saved.")
    except NotificationEndpointError as exc:
        messages.error(request, f"Nothing changed: {exc.message}.")
    return _after(request)
