"""Story: a newcomer follows a tutorial word for word, and it works.

Each test runs one tutorial page as written (``tests/docs/pages.py`` says exactly what it
translates): the files it shows are written, the commands it shows are run in order with the
exit codes it promises. The own-planner-and-adapter tutorial really writes the package into a
scratch directory, installs it so its entry points register, runs it, is SIGKILLed at a crash
point and resumed; the test then checks what the page claims against the database and the
adapter's own store (DESIGN.md sections 5.3 and 5.10).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runtime.models import Run
from tests.docs.pages import Reader, blocks
from tests.engine.support import trace_events
from tests.helpers.procs import child_env

ON_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
# The tutorials are written for the embedded default (SQLite, no server to set up): they run as
# written in the SQLite pass of tests/run; PostgreSQL behind the same commands is what every other
# story of the suite covers.
pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(ON_POSTGRES, reason="a tutorial runs as written on the embedded default: SQLite pass")]


def reader(tmp_path: Path) -> Reader:
    # A short lease, so `resume --wait` finds the dead process's lease expired in seconds.
    return Reader(tmp_path, child_env(RATCHET_LEASE_SECONDS="2"))


def test_the_own_agent_tutorial_is_killed_and_resumed_with_every_write_once(tmp_path: Path) -> None:
    page = reader(tmp_path)
    page.run_page("tutorials/own-planner-and-adapter.md")

    assert (tmp_path / "site" / "guestbook_agent" / "adapter.py").is_file()  # installed, not imported from the page
    run = Run.objects.get(run_id=page.run_id)
    assert run.phase == "completed"
    started = json.dumps(trace_events(run.run_id, "run.started"))
    assert "guestbook-agent" in started  # pinned by its distribution: found through the entry points
    assert trace_events(run.run_id, "recovery.started"), "the resume recovered nothing: the kill did not land"
    book = json.loads((tmp_path / "my-agent" / "book" / "book.json").read_text())
    keys = [r["idempotency_key"] for r in book["receipts"]]
    assert len(keys) == len(set(keys)) == 3
    assert sorted(book["entries"]) == ["Ada", "Grace", "Linus"]


def test_the_first_run_tutorial_runs_as_written(tmp_path: Path) -> None:
    page = reader(tmp_path)
    page.run_page("tutorials/first-run.md")

    run = Run.objects.get(run_id=page.run_id)
    assert run.phase == "completed"
    assert trace_events(run.run_id, "recovery.started")


def test_the_connect_an_agent_tutorial_drives_a_run_through_the_json_api(tmp_path: Path) -> None:
    page = reader(tmp_path)
    page.run_page("tutorials/connect-an-agent.md")

    run = Run.objects.get(run_id=page.run_id)
    assert run.phase == "completed"
    assert (tmp_path / "agent" / "workspace" / "notes" / "hello.txt").read_text() == "hello\n"
    first, again, finish, listed = (json.loads(out) for out in page.outputs[-4:])
    assert first["status"] == "executed" and not first["repeated"]
    assert again["repeated"] and again["receipt"] == first["receipt"]  # the same call id: the original receipt
    assert finish["phase"] == "completed"
    assert [r["call_id"] for r in listed] == ["hello-1"]


def test_the_reader_sees_what_the_pages_promise() -> None:
    """The parser finds the blocks the tests rely on, so an edit that breaks a fence fails here."""
    own = blocks("tutorials/own-planner-and-adapter.md")
    titles = {b.title for b in own if b.title}
    assert {"my-agent/pyproject.toml", "my-agent/guests.toml", "my-agent/guestbook_agent/adapter.py"} <= titles
    commands = "\n".join(b.body for b in own if b.lang == "sh" and not b.skipped)
    assert "RATCHET_CRASH_AT=" in commands and "resume RUN_ID" in commands


def test_the_openai_agents_tutorial_pauses_for_the_approval_and_resumes_without_a_duplicate(tmp_path: Path) -> None:
    page = reader(tmp_path)
    page.run_page("tutorials/openai-agents.md")

    run = Run.objects.get(run_id=page.run_id)
    assert run.phase == "completed"
    assert (tmp_path / "agent" / "workspace" / "config" / "limits.toml").read_text() == "max = 3\n"
    assert not (tmp_path / "agent" / "state.json").exists(), "the resumed agent cleared its saved state"
    receipts = json.loads(page.outputs[-1])
    assert [r["call_id"] for r in receipts] == ["call_0", "call_1"]  # the SDK's tool-call ids, once each
    integration = [line for line in (tmp_path / "agent" / "notes_agent.py").read_text().splitlines() if line.strip()]
    assert len(integration) <= 15
