"""The Django project: settings, URL root, WSGI/ASGI entry points, the Celery app, database routing.

Kept apart from the runtime app so that the app's modules never import the project (the project
wires both apps together; ``runtime.project.urls`` is the one place that imports ``review``).
Start with :mod:`runtime.project.settings` (every knob from an environment variable with a safe
default), then :mod:`runtime.project.celery` (``celery -A runtime worker`` finds it through
``runtime.app``). :mod:`runtime.project.routers` sends the high-water mark model to its own
database (DESIGN.md section 4).
"""
