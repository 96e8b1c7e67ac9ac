"""The gateway's JSON API (``/api/v1/``, django-ninja; DESIGN.md section 5.12)."""
