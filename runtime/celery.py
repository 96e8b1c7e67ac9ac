"""The Celery application: ``celery -A runtime worker`` (house style: tasks carry only ids)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.settings")

app = Celery("runtime")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
