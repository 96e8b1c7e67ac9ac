"""The HTTP adapter: an API that honours ``Idempotency-Key`` (DESIGN.md section 5).

Start at :mod:`runtime.adapters.http.adapter`; :mod:`runtime.adapters.http.options` (base URL,
allowlist, credentials), :mod:`runtime.adapters.http.requests` (building and sending a request),
:mod:`runtime.adapters.http.contract` (what the service must answer) and
:mod:`runtime.adapters.http.receipts`. Framework-free.
"""
