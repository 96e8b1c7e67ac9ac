"""Small outside services the runtime's adapters talk to in tests and the demo (DESIGN.md section 5.8).

* :mod:`runtime.services.orders_service` -- an orders API on loopback implementing the IETF
  httpapi ``Idempotency-Key`` draft and fencing tokens, for the HTTP adapter;
* :mod:`runtime.services.orders_store` -- its SQLite store.

They run in their own processes and import nothing from Django.
"""
