"""URL configuration of an agent process (``RATCHET_PROCESS_ROLE=agent``, DESIGN.md section 2.4):
the JSON API under ``/api/v1/`` and ``/metrics``; every other path answers the API's JSON 404.

The dashboard's patterns come last, behind the catch-all, so they never match a request here
but still ``reverse()``: the gateway's answers carry absolute links to a run's dashboard page,
which people open on the process that serves the dashboard.
"""

from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from runtime.api.v1 import api as gateway_api
from runtime.api.v1 import api_not_found
from runtime.observability.view import metrics_view

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", csrf_exempt(api_not_found)),  # the API's root has no route: JSON, not the dashboard's page
    path("api/v1/", gateway_api.urls),
    # Every other path, whatever the method: the JSON 404 (CSRF exempt: it changes nothing, and a
    # POST to an unknown path should say "not found", not "form expired").
    re_path(r"^(?P<rest>.*)$", csrf_exempt(api_not_found)),
    path("", include("review.urls")),
]
