"""Ratchet's Django project package and durable runtime app."""

from runtime.celery import app as celery_app

__all__ = ("celery_app",)
