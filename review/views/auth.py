"""Signing in and out: the throttled sign-in page (``review.throttle``), sign-out (POST only), and
the Django admin's sign-in sent to the dashboard's. Mounted by ``runtime.project.urls``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from review.throttle import (
    device_cookie_set,
    device_id,
    login_failure_record,
    login_success_record,
    login_throttle_check,
)


def _next_url(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return reverse("review:runs")


@sensitive_post_parameters("password")
@require_http_methods(["GET", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    """Sign in, throttled per username and per client address for unknown clients and per
    device for a browser that signed in as that username before (``review.throttle``).

    While locked the credentials are not checked at all; the answer is 429 with ``Retry-After``.
    """
    next_url = _next_url(request)
    # Signed in and sent here by a page this account may not open (the Django admin for a user
    # who is not staff): show the form to switch accounts; redirecting back would loop.
    if request.method == "GET" and request.user.is_authenticated and not request.GET.get("next"):
        return redirect(next_url)
    form = AuthenticationForm(request, data=request.POST if request.method == "POST" else None)
    lockout = None
    if request.method == "POST":
        signed_in, form, lockout = _attempt(request, form)
        if signed_in:
            response = redirect(next_url)
            device_cookie_set(response=response, username=request.POST.get("username", "")[:200])
            return response
    response = render(request, "review/login.html", {
        "form": form, "next": next_url, "lockout": lockout, "switching": request.user.is_authenticated,
    }, status=429 if lockout else 200)
    if lockout:
        response["Retry-After"] = str(lockout.retry_after_seconds)
    add_never_cache_headers(response)
    return response


def _attempt(request: HttpRequest, form: AuthenticationForm) -> tuple[bool, AuthenticationForm, Any]:
    """One sign-in attempt, unless locked: ``(signed in, form to show, lockout or None)``. A
    wrong password is counted; once locked the form is shown empty."""
    username = request.POST.get("username", "")[:200]
    ip = request.META.get("REMOTE_ADDR", "")
    device = device_id(request=request, username=username)
    lockout = login_throttle_check(username=username, ip=ip, device=device)
    if lockout is None:
        if form.is_valid():
            login(request, form.get_user())
            login_success_record(username=username, device=device)
            return True, form, None
        lockout = login_failure_record(username=username, ip=ip, device=device)
    if lockout is not None:
        return False, AuthenticationForm(request), lockout  # drop the typed values and field errors
    return False, form, None


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """Sign out (POST with CSRF only, so a link or image on another site cannot sign you out)."""
    logout(request)
    return redirect(settings.LOGIN_URL)


def admin_login_redirect(request: HttpRequest) -> HttpResponse:
    """Send the Django admin's sign-in to the throttled dashboard sign-in, keeping ``next``."""
    target = request.GET.get("next", "/admin/")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/admin/"
    return redirect_to_login(target)
