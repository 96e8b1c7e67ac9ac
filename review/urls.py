"""Dashboard URLs. Every view here is wrapped in ``review.permissions.require_perm``; the
authorization matrix test (``tests/review/test_authorization_matrix.py``) fails for a new URL
that is missing from it."""

from django.urls import path

from review import views

app_name = "review"
urlpatterns = [
    path("", views.runs_list, name="runs"),
    path("runs/<str:run_id>/", views.run_detail, name="run"),
    path("attachments/<str:digest>/", views.attachment_download, name="attachment"),
    path("trace/", views.trace_browser, name="trace"),
    path("health/", views.health, name="health"),
]
