"""The fake model for the OpenAI Agents SDK stories, and the SDK's tracing kept on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.planners.chat_tools.conftest import fake_model, shared_fake_model  # noqa: F401


@pytest.fixture(autouse=True)
def no_tracing_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK would export traces to its vendor: nothing leaves loopback here."""
    from agents import set_tracing_disabled

    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    set_tracing_disabled(True)


HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Agents SDK client stories carry the ``postgres`` marker (tests/conftest.py skips them
    on SQLite): they run in the PostgreSQL pass of tests/run, the LangGraph ones in the SQLite
    pass (see tests/gateway_clients/langgraph/conftest.py); the framework's side is the same on
    both databases, and the gateway's stories cover each database. Marked before the root
    conftest reads the markers (``tryfirst``)."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.postgres)
