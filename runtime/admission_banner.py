"""Template context for the dashboard's admission banner (DESIGN.md section 8.3).

``admission_closed`` is lazy: the closed scopes are computed only when a page that shows the
banner (``templates/review/_admission_banner.html``) reads it, for a signed-in user.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from runtime.admission import admission_closed_scopes


def admission_banner(request: HttpRequest) -> dict[str, Any]:
    """``{"admission_closed": [AdmissionState, ...]}`` (lazy), empty for anonymous requests."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"admission_closed": []}
    return {"admission_closed": SimpleLazyObject(admission_closed_scopes)}
