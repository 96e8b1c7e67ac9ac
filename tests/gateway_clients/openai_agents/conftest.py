"""The fake model for the OpenAI Agents SDK stories, and the SDK's tracing kept on loopback."""

from __future__ import annotations

import os

import pytest

from tests.planners.chat_tools.conftest import fake_model, shared_fake_model  # noqa: F401


@pytest.fixture(autouse=True)
def no_tracing_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK would export traces to its vendor: nothing leaves loopback here."""
    from agents import set_tracing_disabled

    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    set_tracing_disabled(True)


ON_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


@pytest.fixture(autouse=True)
def _one_pass() -> None:
    """The Agents SDK client stories run in the PostgreSQL pass of tests/run, the LangGraph ones in
    the SQLite pass (see tests/gateway_clients/langgraph/conftest.py)."""
    if not ON_POSTGRES:
        pytest.skip("runs in the PostgreSQL pass: the framework's side is the same on both "
                    "databases, and the gateway's stories cover each database")
