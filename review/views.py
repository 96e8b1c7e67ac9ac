"""Dashboard views: thin, function-based; logic lives in services."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    """Landing page listing what the dashboard will offer."""
    return render(request, "review/home.html")
