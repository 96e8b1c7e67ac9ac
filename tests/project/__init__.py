"""Tests of the Django project package (``runtime/project/``): settings, URL configurations, roles."""
