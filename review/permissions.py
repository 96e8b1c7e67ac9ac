"""Who may do what on the dashboard, checked in every view (STYLE.md rule 6).

==========================  =========  ========  ========  =========  ==========
page or action              anonymous  stranger  operator  reviewer   admin
==========================  =========  ========  ========  =========  ==========
runs list, run detail       login      403       read      read       read
attachment download         login      403       read      read       read
health                      login      403       read      read       read
trace evidence browser      login      403       403       403        read
evidence bundle download    login      403       403       403        read
approvals queue             login      403       read      403        read
approve / refresh / deny    login      403       POST      403        POST
amend a waiting write       login      403       POST      403        POST
cancel a run                login      403       POST      403        POST
review cases, one case      login      403       403       read       read
decide a case               login      403       403       POST       POST
==========================  =========  ========  ========  =========  ==========

Tenants are a second dimension (``review.scope``, DESIGN.md section 6.6): inside a page the user
may open, a run, case or approval of a tenant outside their scope is a 404, as if it did not
exist, and every list, badge and count leaves it out.

"login" is a redirect to the sign-in page (a 401 carrying ``HX-Redirect`` for htmx requests, so a
polled fragment sends the browser to sign in instead of swapping the login form into a table).
A *stranger* is a signed-in user in none of the three groups. The run detail shows each run's own
trace timeline to every role, because an operator deciding on a frozen action must see its trace
(DESIGN.md section 6); browsing evidence *across* runs is the admin's ("admin (all, plus trace)").

Every action is a POST with the CSRF token (the middleware refuses it before the view runs) and
calls a runtime service as the signed-in user.

The check lives in the view decorator, so an htmx fragment request gets exactly the same check as
the full page: a check that only wraps a fragment in a template protects nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from functools import wraps
from typing import Any, TypeVar
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme

View = TypeVar("View", bound=Callable[..., HttpResponse])


class Perm(StrEnum):
    """The dashboard's permissions (``app_label.codename``) on ``review.models.Dashboard``."""

    VIEW_RUNS = "review.view_runs"
    VIEW_TRACE = "review.view_trace"
    APPROVE_ACTION = "review.approve_action"
    DENY_ACTION = "review.deny_action"
    REFRESH_APPROVAL = "review.refresh_approval"
    AMEND_ACTION = "review.amend_action"
    CANCEL_RUN = "review.cancel_run"
    DECIDE_CASE = "review.decide_case"
    RESTART_RUN = "review.restart_run"

    @property
    def codename(self) -> str:
        """The permission's codename without the app label, e.g. ``"view_runs"``."""
        return self.value.split(".", 1)[1]


def _login_response(request: HttpRequest) -> HttpResponse:
    htmx = getattr(request, "htmx", None)
    if htmx:
        # Send the browser (not the fragment) to sign in, and back to the page it was on.
        page = htmx.current_url_abs_path or "/"
        if not url_has_allowed_host_and_scheme(page, allowed_hosts={request.get_host()}):
            page = "/"
        response = HttpResponse("Sign in to continue.", status=401, content_type="text/plain")
        response["HX-Redirect"] = f"{settings.LOGIN_URL}?{urlencode({'next': page})}"
        return response
    return redirect_to_login(request.get_full_path())


def require_perm(perm: Perm) -> Callable[[View], View]:
    """Decorate a view so only users holding ``perm`` reach it.

    Anonymous: a redirect to ``LOGIN_URL`` (or a 401 with ``HX-Redirect`` for htmx requests).
    Signed in without ``perm``: ``PermissionDenied`` (403). Every response is marked
    never-cache and ``Vary: HX-Request``, because the same URL answers with a page or a fragment.
    The decorated view carries ``required_permission`` so tests can prove every URL is checked.
    """

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return _login_response(request)
            if not request.user.has_perm(perm.value):
                raise PermissionDenied(f"{perm.value} is required")
            response = view(request, *args, **kwargs)
            add_never_cache_headers(response)
            patch_vary_headers(response, ("HX-Request",))
            return response

        wrapped.required_permission = perm  # type: ignore[attr-defined]
        return wrapped  # type: ignore[return-value]

    return decorator
