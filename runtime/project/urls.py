"""Root URL configuration: the dashboard, its sign-in and the (read-only for runtime) admin."""

from django.contrib import admin
from django.urls import include, path, re_path

from review.views import auth
from runtime.api.v1 import api as gateway_api
from runtime.api.v1 import api_not_found
from runtime.observability.view import metrics_view

urlpatterns = [
    path("accounts/login/", auth.login_view, name="login"),
    path("accounts/logout/", auth.logout_view, name="logout"),
    # The admin signs in through the throttled dashboard sign-in, never its own form.
    path("admin/login/", auth.admin_login_redirect, name="admin-login"),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", gateway_api.urls),  # the agent gateway's JSON API (DESIGN.md section 5.12)
    re_path(r"^api/v1/(?P<rest>.*)$", api_not_found),  # the API's own JSON 404, not the dashboard's page
    path("", include("review.urls")),
]
