"""Story: the workspace adapter reads its receipt journal incrementally, so a call does not cost
O(writes) (DESIGN.md section 5.3; the rule is in ``runtime.adapters.workspace.journal``): a call
parses only the lines appended since the process's last read of that journal, and a journal that
was truncated, replaced or edited near the end of that read is read again in full, so its
corruption still fails closed; the audit's ``receipts()`` always reads every line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.adapters.workspace.journal import ReceiptJournal
from runtime.errors import AdapterStoreCorruptError
from tests.adapters.support import Env


def _journal(env: Env) -> Path:
    return env.path / ".ratchet" / "journal.jsonl"


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many lines each journal read parsed, in order."""
    counts: list[int] = []
    real = ReceiptJournal._parse

    def counting(self, data, *, first_line):  # type: ignore[no-untyped-def]
        records, torn = real(self, data, first_line=first_line)
        counts.append(len(records))
        return records, torn

    monkeypatch.setattr(ReceiptJournal, "_parse", counting)
    return counts


def test_a_call_parses_only_the_lines_appended_since_the_last_read(workspace_env: Env, parsed: list[int]
                                                                   ) -> None:
    for n in range(12):
        workspace_env.execute(workspace_env.write(f"f{n}.txt", b"x\n"), f"key-{n}")
    parsed.clear()

    assert workspace_env.adapter.lookup_receipt("key-3") is not None
    workspace_env.execute(workspace_env.write("g.txt", b"y\n"), "key-g")
    assert workspace_env.adapter.observe().version == "w13"

    # Each read parses what the call before it appended: the last write's prepared and
    # committed lines, nothing after a look-up, then the new write's two lines.
    assert parsed == [2, 0, 2], parsed
    assert len(workspace_env.adapter.receipts()) == 13 and parsed[-1] == 26, "the audit reads all"


def test_a_journal_cut_short_is_read_again_in_full(workspace_env: Env) -> None:
    for n in range(3):
        workspace_env.execute(workspace_env.write(f"f{n}.txt", b"x\n"), f"key-{n}")
    lines = _journal(workspace_env).read_bytes().splitlines(keepends=True)
    _journal(workspace_env).write_bytes(b"".join(lines[:-1]))  # the last committed line is gone

    # Read from the first line again, the journal shows an interrupted write whose target has
    # its post-state: it is rolled forward, as after a kill between the rename and the receipt.
    assert workspace_env.adapter.observe().version == "w3"
    receipt = workspace_env.adapter.lookup_receipt("key-2")
    assert receipt is not None and receipt.result.get("recovered") is True


def test_a_replaced_journal_is_read_again_in_full(workspace_env: Env) -> None:
    workspace_env.execute(workspace_env.write("a.txt", b"a\n"), "key-a")
    journal = _journal(workspace_env)
    other = journal.with_name("other.jsonl")
    other.write_bytes(b"not json\n" + journal.read_bytes())
    os.replace(other, journal)

    with pytest.raises(AdapterStoreCorruptError):
        workspace_env.adapter.lookup_receipt("key-a")


def test_an_edit_near_the_end_of_the_last_read_is_read_again_in_full(workspace_env: Env) -> None:
    workspace_env.execute(workspace_env.write("a.txt", b"a\n"), "key-a")
    journal = _journal(workspace_env)
    data = journal.read_bytes()
    journal.write_bytes(data[:-10] + b"}}broken!\n" + b'{"key":"k","type":"aborted"}\n')

    with pytest.raises(AdapterStoreCorruptError):
        workspace_env.adapter.lookup_receipt("key-a")


def test_an_edit_deep_inside_is_caught_by_the_full_read_of_the_audit(workspace_env: Env) -> None:
    for n in range(3):
        workspace_env.execute(workspace_env.write(f"f{n}.txt", b"x\n"), f"key-{n}")
    journal = _journal(workspace_env)
    data = journal.read_bytes()
    edited = data.replace(b'"key":"key-0"', b'"key":"key-9"', 1)  # same length, far from the end
    journal.write_bytes(edited)

    assert workspace_env.adapter.lookup_receipt("key-2") is not None, "an incremental read trusts it"
    with pytest.raises(AdapterStoreCorruptError):
        workspace_env.adapter.receipts()
    with pytest.raises(AdapterStoreCorruptError):
        workspace_env.adapter.lookup_receipt("key-2")  # from then on every call reads in full


def test_a_new_adapter_object_in_the_same_process_reads_on_from_the_last_read(
        workspace_env: Env, parsed: list[int]) -> None:
    for n in range(5):
        workspace_env.execute(workspace_env.write(f"f{n}.txt", b"x\n"), f"key-{n}")
    parsed.clear()

    assert workspace_env.reopen().observe().version == "w5"
    assert parsed == [2], "a worker's next batch opens a new adapter and reads on"


def test_a_kept_read_holds_receipts_as_checked_json_and_agrees_with_a_fresh_read(
        workspace_env: Env) -> None:
    made = [workspace_env.execute(workspace_env.write(f"f{n}.txt", b"x\n"), f"key-{n}")
            for n in range(5)]
    journal = ReceiptJournal(_journal(workspace_env), instance_id=workspace_env.adapter.instance_id(),
                             namespace=made[0].namespace,
                             adapter_version=made[0].adapter_version)

    kept = journal.load()
    fresh = journal.load(full=True)

    # A worker keeps its reads for a whole run: bytes, not parsed models (a quarter the memory).
    assert all(isinstance(raw, bytes) for raw in kept.by_key.values())
    assert kept.by_key == fresh.by_key and kept.count == 5
    assert kept.receipts() == made == fresh.receipts()
    assert kept.receipt("key-3") == made[3] and kept.receipt("key-9") is None
