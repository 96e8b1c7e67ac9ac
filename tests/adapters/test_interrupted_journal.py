"""The workspace journal after a crash or tampering: a torn last line (killed mid-append) is
dropped and the interrupted write settled; a corrupt line in the middle or an interrupted write
whose target was edited afterwards is never guessed at -- it fails closed with a typed error."""

from __future__ import annotations

import json
import signal

import pytest

from runtime.errors import AdapterStoreCorruptError, ReceiptIndeterminateError
from tests.adapters.support import Env, journal_records, run_child


def test_a_torn_last_line_is_dropped_and_the_write_rolled_forward(workspace_env: Env) -> None:
    action = workspace_env.write("notes/todo.txt", b"ship it\n")
    child = run_child(workspace_env, action, "key-1", crash_at="workspace.after_rename")
    assert child.returncode == -signal.SIGKILL
    journal = workspace_env.path / ".ratchet" / "journal.jsonl"
    with journal.open("ab") as handle:
        handle.write(b'{"key":"key-1","type":"commi')  # a committed line cut short by the kill

    receipt = workspace_env.reopen().lookup_receipt("key-1")

    assert receipt is not None and receipt.result["recovered"] is True
    assert journal.read_bytes().endswith(b"\n")
    assert [r["type"] for r in journal_records(workspace_env.path)] == ["prepared", "committed"]


def test_a_corrupt_line_in_the_middle_fails_closed(workspace_env: Env) -> None:
    workspace_env.execute(workspace_env.write("a.txt", b"a\n"), "key-a")
    journal = workspace_env.path / ".ratchet" / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text(lines[0] + "not json\n" + "".join(lines[1:]))

    with pytest.raises(AdapterStoreCorruptError):
        workspace_env.adapter.lookup_receipt("key-a")
    with pytest.raises(AdapterStoreCorruptError):
        workspace_env.adapter.observe()


def test_an_interrupted_write_edited_afterwards_is_indeterminate(workspace_env: Env) -> None:
    action = workspace_env.write("notes/todo.txt", b"ship it\n")
    child = run_child(workspace_env, action, "key-1", crash_at="workspace.after_rename")
    assert child.returncode == -signal.SIGKILL
    (workspace_env.path / "notes" / "todo.txt").write_text("someone else's words\n")

    adapter = workspace_env.reopen()
    with pytest.raises(ReceiptIndeterminateError) as caught:
        adapter.lookup_receipt("key-1")
    assert caught.value.context["idempotency_key"] == "key-1"
    with pytest.raises(ReceiptIndeterminateError):
        workspace_env.execute(workspace_env.write("b.txt", b"b\n"), "key-2", adapter=adapter)
    assert not (workspace_env.path / "b.txt").exists()
    assert adapter.observe().version == "w0"


def test_a_journal_record_never_holds_file_content(workspace_env: Env) -> None:
    workspace_env.execute(workspace_env.write("secret.txt", b"hunter2-not-in-the-journal\n"), "k")

    raw = (workspace_env.path / ".ratchet" / "journal.jsonl").read_text()

    assert "hunter2" not in raw
    assert all(isinstance(json.loads(line), dict) for line in raw.splitlines())
