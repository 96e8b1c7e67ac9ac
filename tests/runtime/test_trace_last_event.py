"""Altering the *last* trace event of a run is detected (DESIGN.md sections 4.8 and 7).

Story (a hole a mutation check found): every chain test edited an event in the middle, whose
successor's ``prev_hash`` exposes it; nothing follows the last event, so only its own hash and
the head anchored on the run row (and, offline, in the signed bundle) can. Someone with database
access edits the last event -- with and without recomputing its hash -- and both the live check
(``trace_verify``) and the offline one (``verify_bundle``) must say so.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from runtime.core.signing import TrustRoot
from runtime.evidence.trace import event_hash, trace_append, trace_verify
from runtime.keys import keyring_for
from runtime.models import TraceEvent
from tests.review.rows import build_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_id(start_run) -> str:
    state, _first = start_run()
    trace_append(run_id=state.identity.run_id, event_type="verifier.passed", payload={"ok": True},
                 environment_version="v0")
    return state.identity.run_id


def _last(run_id: str) -> TraceEvent:
    return TraceEvent.objects.filter(run_id=run_id).order_by("-seq").first()


@pytest.mark.parametrize(("field", "value"), [
    ("payload", {"ok": False}),
    ("event_type", "verifier.failed"),
    ("environment_version", "v9"),
])
def test_it_detects_an_edit_to_the_last_event(run_id, field, value):
    last = _last(run_id)
    TraceEvent.objects.filter(pk=last.pk).update(**{field: value})

    report = trace_verify(run_id=run_id)

    assert (report.ok, report.first_bad_seq) == (False, last.seq)
    assert "altered" in report.reason


def test_it_detects_a_moved_timestamp_on_the_last_event(run_id):
    last = _last(run_id)
    TraceEvent.objects.filter(pk=last.pk).update(created_at=last.created_at - timedelta(hours=1))

    report = trace_verify(run_id=run_id)

    assert (report.ok, report.first_bad_seq) == (False, last.seq)


def test_it_detects_the_last_event_rewritten_with_its_hash_recomputed(run_id):
    """Nothing links to the last event, so only the head on the run row can tell."""
    last = _last(run_id)
    forged = event_hash(run_id=run_id, seq=last.seq, event_type=last.event_type, payload={"ok": False},
                        environment_version=last.environment_version, created_at=last.created_at,
                        prev_hash=last.prev_hash)
    TraceEvent.objects.filter(pk=last.pk).update(payload={"ok": False}, hash=forged)

    report = trace_verify(run_id=run_id)

    assert (report.ok, report.first_bad_seq) == (False, last.seq)
    assert "not the head the run recorded" in report.reason


@pytest.fixture
def bundle_file(tmp_path: Path) -> Path:
    build_run(keyring_for(TrustRoot.CHECKPOINT), run_id="run-last", generations=1, events=4)
    out = tmp_path / "bundle.json"
    call_command("export_bundle", "run-last", "--out", str(out), "--by", "ops", stderr=StringIO())
    return out


def _verify_bundle(path: Path) -> str:
    try:
        call_command("verify_bundle", str(path), stdout=StringIO())
    except CommandError as exc:
        return str(exc)
    return "verifies"


def test_it_detects_an_edit_to_the_last_event_in_an_exported_bundle(bundle_file):
    bundle = json.loads(bundle_file.read_text())
    assert _verify_bundle(bundle_file) == "verifies"
    bundle["trace"][-1]["payload"] = {"edited": True}
    bundle_file.write_text(json.dumps(bundle))

    message = _verify_bundle(bundle_file)

    assert f"trace: event seq {len(bundle['trace'])} was altered" in message


def test_it_detects_the_last_bundle_event_rewritten_with_its_hash_recomputed(bundle_file):
    bundle = json.loads(bundle_file.read_text())
    last = bundle["trace"][-1]
    last["payload"] = {"edited": True}
    last["hash"] = event_hash(run_id="run-last", seq=last["seq"], event_type=last["event_type"],
                              payload=last["payload"], environment_version=last["environment_version"],
                              created_at=datetime.fromisoformat(last["created_at"]),
                              prev_hash=last["prev_hash"])
    bundle_file.write_text(json.dumps(bundle))

    message = _verify_bundle(bundle_file)

    assert message != "verifies"
    assert "trace:" in message  # the chain no longer ends at the run's recorded head
