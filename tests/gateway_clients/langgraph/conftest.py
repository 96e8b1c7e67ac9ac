"""The LangGraph stories: the fake OpenAI-compatible model server on loopback (its own process)."""

from tests.planners.chat_tools.conftest import fake_model, shared_fake_model  # noqa: F401
