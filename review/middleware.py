"""Content-Security-Policy header: the dashboard runs no script or style from elsewhere, nothing inline.

Django 5.2 has no CSP support of its own and the policy is one fixed string, so a dozen lines here
replace a dependency. The policy comes from ``RATCHET_CSP`` (settings); the default allows
scripts, styles and requests only from this origin and nothing inline, which the dashboard keeps:
htmx is vendored under ``static/``, configured through its ``htmx-config`` meta tag with
``allowEval`` and ``includeIndicatorStyles`` off, and there is no inline script or style.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    """Add ``Content-Security-Policy: settings.RATCHET_CSP`` to responses that have none.

    A view that needs a stricter policy (an attachment download) sets its own header first.
    An empty ``RATCHET_CSP`` disables the header.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = settings.RATCHET_CSP
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
