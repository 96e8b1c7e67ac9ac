"""Story: a newcomer follows the LangGraph tutorial word for word, with the fake OpenAI-compatible
model server standing in for the model (``OPENAI_BASE_URL``): the graph pauses on the approval,
the approval command shown on the page lets the resumed graph write once, and the run completes
(DESIGN.md section 5.12)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.models import Run
from tests.docs.pages import Reader, blocks
from tests.gateway.support import effects_by_key
from tests.helpers.procs import child_env
from tests.planners.chat_tools.conftest import fake_model, shared_fake_model  # noqa: F401

ON_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
# The tutorials are written for the embedded default (SQLite, no server to set up): they run as
# written in the SQLite pass of tests/run; PostgreSQL behind the same commands is what every other
# story of the suite covers.
pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(ON_POSTGRES, reason="a tutorial runs as written on the embedded default: SQLite pass")]

PAGE = "tutorials/langgraph.md"
SCRIPT = [
    {"tool": "write_file", "arguments": {"path": "notes/hello.txt", "content": "hello\n"}},
    {"tool": "write_file", "arguments": {"path": "config/limits.toml", "content": "max = 3\n"}},
    {"finish": "note and limits written"},
    {"content": "done"},
]


def test_the_langgraph_tutorial_pauses_on_the_approval_and_writes_once(tmp_path: Path, fake_model) -> None:  # noqa: F811
    model = fake_model(SCRIPT)
    page = Reader(tmp_path, child_env(RATCHET_LEASE_SECONDS="2", RATCHET_PUBLIC_BASE_URL="https://ratchet.example.test",
                                      OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="not-a-key"))
    page.run_page(PAGE)

    run = Run.objects.get(run_id=page.run_id)
    paused, resumed = page.outputs[3], page.outputs[5]
    assert paused.strip() == f"https://ratchet.example.test/runs/{run.run_id}/"
    assert resumed.strip() == "done"
    assert run.phase == "completed"
    workspace = tmp_path / "lg" / "workspace"
    assert (workspace / "config" / "limits.toml").read_text() == "max = 3\n"
    assert sorted(effects_by_key(workspace).values()) == [1, 1]
    assert model.requests_per_step() == {0: 1, 1: 1, 2: 1, 3: 1}, "the resumed graph asked nothing twice"


def test_the_integration_on_the_page_is_at_most_fifteen_lines() -> None:
    [agent] = [b for b in blocks(PAGE) if b.title == "lg/agent.py"]
    assert len(agent.body.splitlines()) <= 15
    assert "ratchet_tools" in agent.body and "Command(resume=" in agent.body
