"""Fixtures for the HTTP-through-the-engine stories: an orders service of the test's own, and the
credential, secret input and redaction key for runs this process drives itself."""

from __future__ import annotations

import pytest

from tests.adapters.http.support import EMAIL_ENV, TOKEN_ENV, OrdersService, orders  # noqa: F401


@pytest.fixture
def secrets_in_env(orders: OrdersService, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """This process drives the run: it needs the credential, the secret input and the redaction key."""
    for name in (TOKEN_ENV, EMAIL_ENV, "RATCHET_REDACTION_KEY"):
        monkeypatch.setenv(name, orders.env[name])


# The chat-tools stories of this directory drive a run with the fake model server.
from tests.planners.chat_tools.conftest import fake_model, shared_fake_model  # noqa: E402, F401
