"""Story: an operator measures what one replayed commit stores (DESIGN.md section 4.14).

``manage.py bench --only storage`` replays a generated history once and reports bytes and rows
per commit. Bytes depend on the engine and its page sizes; the rows per commit do not, so this
checks the rows: one ledger entry, one cache row and four trace events per commit, one
attachment row per distinct file content (git holds the bytes; nothing per observation), and no
byte of the var directory for a git replay.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.bench.history import build_source_history, write_replay_task
from runtime.bench.report import BenchReport
from runtime.bench.sizes import BenchSizes
from runtime.bench.storage import storage_measure
from runtime.models import Attachment, LedgerEntry, TraceEvent

pytestmark = pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction

COMMITS = 6


@pytest.fixture
def measured(tmp_path: Path, ratchet_keys: dict) -> BenchReport:
    work = tmp_path / "work"  # the source and the clones: not var
    build_source_history(path=work / "source", commits=COMMITS)
    task = write_replay_task(directory=work / "replay", source=work / "source", commits=COMMITS)
    report = BenchReport(machine={}, sizes={})
    storage_measure(report=report, sizes=BenchSizes(commits=COMMITS), task=task, work=work)
    return report


def test_it_reports_rows_and_bytes_per_commit_of_one_replay(measured: BenchReport) -> None:
    facts = measured.facts
    rows = facts["storage_rows_per_commit"]
    assert facts["storage_commits"] == COMMITS
    assert rows["LedgerEntry"] == 1 and rows["IdempotencyRecord"] == 1
    writes = TraceEvent.objects.filter(event_type="write.executed").count()
    assert writes == COMMITS
    # intent, write, and the two checkpoints that commit them; the run's start and end are few.
    per_write = {t: TraceEvent.objects.filter(event_type=t).count() / COMMITS
                 for t in ("intent.proposed", "write.executed")}
    assert per_write == {"intent.proposed": 1, "write.executed": 1}
    assert facts["storage_db_bytes_per_commit"] > 0
    by_table = facts["storage_db_bytes_per_commit_by_table"]
    assert {"runtime_checkpoint", "runtime_traceevent", "runtime_ledgerentry"} <= set(by_table)
    assert abs(sum(by_table.values()) - facts["storage_db_bytes_per_commit"]) <= len(by_table), "rounding only"


def test_a_git_replay_stores_one_attachment_row_per_file_content_and_no_var_bytes(measured: BenchReport) -> None:
    contents = set()
    for payload in TraceEvent.objects.filter(event_type="intent.proposed").values_list("payload", flat=True):
        contents.update(c["content"] for c in payload["action"]["params"]["changes"] if c.get("content"))
    stored = set(Attachment.objects.exclude(storage_name__startswith="git:").values_list("digest", flat=True))

    assert set(Attachment.objects.filter(storage_name__startswith="git:").values_list("digest", flat=True)) == contents
    assert len(stored) == 1, "only the (empty, shared) status of a clean tree: no copy of HEAD per write"
    assert measured.facts["storage_var_bytes_per_commit"] == 0
    assert measured.facts["storage_var_to_clone"] == 0


def test_a_write_event_names_its_receipt_by_the_fingerprint_the_ledger_holds(measured: BenchReport) -> None:
    del measured
    ledger = {e.key: json.loads(e.body) for e in LedgerEntry.objects.filter(kind="executed_write")}
    events = list(TraceEvent.objects.filter(event_type="write.executed").values_list("payload", flat=True))

    assert len(events) == len(ledger) == COMMITS
    for payload in events:
        assert "receipt" not in payload, "the receipt is in the ledger entry, not copied into the trace"
        entry = ledger[payload["idempotency_key"]]
        assert payload["receipt_fingerprint"] == entry["receipt_fingerprint"]
        assert payload["receipt_id"] == entry["receipt"]["receipt_id"]
        assert payload["adapter_version"] == entry["receipt"]["adapter_version"]
