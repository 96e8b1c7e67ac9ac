"""Root URL configuration: the dashboard, its sign-in and the (read-only for runtime) admin."""

from django.contrib import admin
from django.urls import include, path

from review import views as review_views

urlpatterns = [
    path("accounts/login/", review_views.login_view, name="login"),
    path("accounts/logout/", review_views.logout_view, name="logout"),
    # The admin signs in through the throttled dashboard sign-in, never its own form.
    path("admin/login/", review_views.admin_login_redirect, name="admin-login"),
    path("admin/", admin.site.urls),
    path("", include("review.urls")),
]
