"""The gateway's JSON API (``/api/v1/``, django-ninja; DESIGN.md sections 5.12 and 5.13): the agent
endpoints (:mod:`runtime.api.v1`) and the operator endpoints (:mod:`runtime.api.operator`)."""
