"""``GET /metrics``: the counters for Prometheus, behind a bearer token (DESIGN.md section 8.1).

With ``RATCHET_METRICS_TOKEN`` set, a request must carry ``Authorization: Bearer <token>``
(compared in constant time; the token is never logged or echoed). Without it, only a request
from the loopback address is served, so a fresh install exposes nothing to the network; behind a
reverse proxy on the same machine every request looks local, so set a token there.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from runtime.observability.export import metrics_exposition


def _loopback(request: HttpRequest) -> bool:
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def _authorised(request: HttpRequest) -> bool:
    token = getattr(settings, "RATCHET_METRICS_TOKEN", "")
    if not token:
        return _loopback(request)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The exposition, or 401 (token configured, wrong or missing) / 403 (no token, not loopback)."""
    if not _authorised(request):
        status = 401 if getattr(settings, "RATCHET_METRICS_TOKEN", "") else 403
        response = HttpResponse("metrics need the bearer token (RATCHET_METRICS_TOKEN)\n" if status == 401
                                else "metrics are served to loopback only unless RATCHET_METRICS_TOKEN is set\n",
                                status=status, content_type="text/plain; charset=utf-8")
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="ratchet-metrics"'
        return response
    return HttpResponse(metrics_exposition(), content_type=CONTENT_TYPE_LATEST)
