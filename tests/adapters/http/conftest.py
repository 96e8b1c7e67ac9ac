"""Fixtures for the HTTP adapter stories; the helpers behind them live in ``support.py``."""

from tests.adapters.http.support import orders, shared_orders  # noqa: F401
