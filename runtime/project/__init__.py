"""The Django project: settings, URL root, WSGI/ASGI entry points and the Celery app.

Kept apart from the runtime app: the project wires the apps together (``runtime.project.urls`` is
the one place that imports ``review``), and no module of the apps imports the project. Start with
:mod:`runtime.project.settings` (every knob from an environment variable with a safe default),
then :mod:`runtime.project.celery` (``celery -A runtime worker`` finds it through ``runtime.app``).
"""

# Celery's Django layout: the project's Celery app is created whenever the project is loaded (the
# settings module lives in this package), so every configured process has it as its current app
# and the runtime app can address it without importing the project (runtime.workers.dispatch).
from runtime.project.celery import app as celery_app

__all__ = ("celery_app",)
