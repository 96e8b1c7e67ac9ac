"""The tamper matrix: every main-database and mark-store row kind edited one at a time
(DESIGN.md sections 4.10 and 4.15).

For each edit of a row kind (the run row's phase and generation, the lease fields, a review case
row, the approval a trace event carries, a trace event, a receipts-ledger row, the checkpoint's
bytes, the mark's generation and digest) three things hold:

* ``checkpoint verify`` reports it (a typed error, or a finding naming the row) -- except the
  lease fields, which are coordination, not evidence: an edit of them may delay a run or let
  another worker take it, never give a write two effects (fencing refuses the stale holder);
* a person's ``resume`` fails closed with a typed error and the run has an open review case;
* ``verify-bundle``, given a bundle whose same part was edited and which the exporter's key
  signed again (an insider), names it.

Runs on SQLite and PostgreSQL alike (the suite's two database modes).
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import F
from django.db.models.functions import Now

from runtime import errors
from runtime.bundles.export import bundle_export, bundle_sign
from runtime.bundles.verification import bundle_verify
from runtime.core.signing import TrustRoot
from runtime.database.routers import hwm_alias
from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance, run_start
from runtime.keys import signer_for
from runtime.models import Checkpoint, HighWaterMark, LedgerEntry, ReviewCase, Run, TraceEvent
from tests.engine.support import restore, run_target
from tests.factories import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = [{"target": "a.txt", "content": "a\n"}, {"target": "limits.toml", "content": "max = 3\n", "risk": "high"},
         {"target": "c.txt", "content": "c\n"}]


@dataclass(frozen=True)
class Edit:
    """One row kind edited in the database, and the same part edited in a bundle."""

    name: str
    database: Callable[[str], None]
    bundle: Callable[[dict], None] | None
    evidence: bool = True


def _newest(model, run_id: str, order: str = "-seq"):  # type: ignore[no-untyped-def]
    return model.objects.filter(run_id=run_id).order_by(order).first()


def _edit_payload(run_id: str, event_type: str) -> None:
    event = TraceEvent.objects.filter(run_id=run_id, event_type=event_type).order_by("-seq").first()
    assert event is not None, event_type
    payload = copy.deepcopy(event.payload)
    if "approval" in payload:
        payload["approval"]["approver"] = "mallory"
    else:
        payload["edited"] = True
    TraceEvent.objects.filter(pk=event.pk).update(payload=payload)


def _bundle_event(event_type: str) -> Callable[[dict], None]:
    def edit(bundle: dict) -> None:
        event = [e for e in bundle["trace"] if e["event_type"] == event_type][-1]
        if "approval" in event["payload"]:
            event["payload"]["approval"]["approver"] = "mallory"
        else:
            event["payload"]["edited"] = True
    return edit


def _flip(raw: bytes) -> bytes:
    data = bytearray(raw)
    data[len(data) // 2] ^= 0x01
    return bytes(data)


def _committed(run_id: str) -> Checkpoint:
    mark = HighWaterMark.objects.using(hwm_alias()).get(run_id=run_id)
    return Checkpoint.objects.get(run_id=run_id, generation=mark.generation, digest=mark.checkpoint_digest)


def _bundle_checkpoint(bundle: dict) -> None:
    text = bundle["committed_checkpoint"]["envelope"]
    bundle["committed_checkpoint"]["envelope"] = text.replace('"generation":', '"generation": ', 1) \
        if '"generation":' in text else text[:-2] + "x}"


def _ledger_row(bundle: dict) -> None:
    bundle["ledger"][-1]["body"] = bundle["ledger"][-1]["body"].replace('"', "'", 1)


EDITS = [
    Edit("run row phase", lambda r: Run.objects.filter(run_id=r).update(phase="completed", stop_reason="verified"),
         lambda b: b["run"].update(phase="completed", stop_reason="verified")),
    Edit("run row generation", lambda r: Run.objects.filter(run_id=r).update(generation=F("generation") + 2),
         lambda b: b["run"].update(generation=b["run"]["generation"] + 2)),
    Edit("lease fields", lambda r: Run.objects.filter(run_id=r).update(owner_worker="ghost", lease_expires_at=Now(),
                                                                        lease_version=F("lease_version") - 1),
         None, evidence=False),
    Edit("approval row", lambda r: _edit_payload(r, "approval.granted"), _bundle_event("approval.granted")),
    Edit("trace event", lambda r: _edit_payload(r, "intent.proposed"), _bundle_event("intent.proposed")),
    Edit("ledger row", lambda r: LedgerEntry.objects.filter(pk=_newest(LedgerEntry, r).pk).update(
        body=_newest(LedgerEntry, r).body.replace('"', "'", 1)), _ledger_row),
    Edit("checkpoint bytes", lambda r: Checkpoint.objects.filter(pk=_committed(r).pk).update(
        envelope=_flip(bytes(_committed(r).envelope))), _bundle_checkpoint),
    Edit("mark generation", lambda r: HighWaterMark.objects.using(hwm_alias()).filter(run_id=r).update(
        generation=F("generation") - 1), lambda b: b["high_water_mark"].update(
        generation=b["high_water_mark"]["generation"] - 1)),
    Edit("mark digest", lambda r: HighWaterMark.objects.using(hwm_alias()).filter(run_id=r).update(
        checkpoint_digest="sha256:" + "0" * 64), lambda b: b["high_water_mark"].update(
        checkpoint_digest="sha256:" + "0" * 64)),
]


def _run_past_an_approval(tmp_path: Path) -> str:
    """A paused run with a granted approval, a ledger entry and a trace, its lease released."""
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS, approval_risks=("high",)))
    assert run_advance(run_id=run_id).phase == "awaiting_approval"
    waiting = restore(run_id).state
    approval_grant(run_id=run_id, approver="olivia",
                   environment_fingerprint=waiting.pending.pre_state.state_fingerprint)
    assert run_advance(run_id=run_id, max_steps=2).phase in ("running", "pending")
    return run_id


def _verify_command(run_id: str) -> str | None:
    """``checkpoint verify``'s complaint, or None when it says valid."""
    try:
        call_command("checkpoint", "verify", run_id, stdout=io.StringIO())
    except CommandError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("edit", EDITS, ids=[e.name for e in EDITS])
def test_every_row_kind_edited_alone_fails_closed_and_is_reported(tmp_path: Path, edit: Edit) -> None:
    run_id = _run_past_an_approval(tmp_path)
    bundle = bundle_export(run_id=run_id, exported_by="tamper-matrix")
    assert bundle_verify(bundle) == []
    files = sorted(p.name for p in run_target(run_id).iterdir() if not p.name.startswith("."))

    edit.database(run_id)

    complaint = _verify_command(run_id)
    if edit.evidence:
        assert complaint, f"checkpoint verify did not report the edited {edit.name}"
    out = io.StringIO()
    if edit.evidence:
        with pytest.raises(CommandError):
            call_command("resume", run_id, "--json", "--no-progress", stdout=out, stderr=io.StringIO())
        error = json.loads(out.getvalue())["error"]
        assert issubclass(getattr(errors, error), errors.RatchetError), error
        assert ReviewCase.objects.filter(run_id=run_id, status="open").exists(), edit.name
        assert sorted(p.name for p in run_target(run_id).iterdir() if not p.name.startswith(".")) == files
    else:
        # Coordination, not evidence: the next holder recovers the run, every write once.
        call_command("resume", run_id, "--no-progress", stdout=out, stderr=io.StringIO())
        assert (run_target(run_id) / "c.txt").read_text() == "c\n"
        assert LedgerEntry.objects.filter(run_id=run_id).values("key").distinct().count() == \
            LedgerEntry.objects.filter(run_id=run_id).count()

    if edit.bundle is not None:
        forged = copy.deepcopy(bundle)
        edit.bundle(forged)
        forged = bundle_sign(forged, keyring=signer_for(TrustRoot.EXPORT))
        assert bundle_verify(json.loads(json.dumps(forged))), f"verify-bundle passed an edited {edit.name}"


def test_a_case_row_edited_alone_is_reported_and_keeps_the_run_frozen(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS[:1]))
    (run_target(run_id) / "a.txt").write_text("written behind the run's back\n")
    assert run_advance(run_id=run_id).phase == "needs_review"
    bundle = bundle_export(run_id=run_id, exported_by="tamper-matrix")
    assert bundle_verify(bundle) == []
    case = ReviewCase.objects.get(run_id=run_id)

    ReviewCase.objects.filter(pk=case.pk).update(status="replanned")

    assert "row says replanned but the signed checkpoint says open" in (_verify_command(run_id) or "")
    out = io.StringIO()
    with pytest.raises(CommandError) as caught:  # still frozen: exit 5, nothing stepped
        call_command("resume", run_id, "--json", "--no-progress", stdout=out, stderr=io.StringIO())
    assert caught.value.returncode == 5 and json.loads(out.getvalue())["phase"] == "needs_review"
    forged = copy.deepcopy(bundle)
    forged["review_cases"][0]["status"] = "replanned"
    findings = bundle_verify(bundle_sign(forged, keyring=signer_for(TrustRoot.EXPORT)))
    assert any("status replanned but the committed checkpoint says open" in f for f in findings), findings
