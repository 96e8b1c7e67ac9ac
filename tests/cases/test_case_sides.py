"""Every case kind shows both sides of what conflicted, readable, with a diff where one applies
(DESIGN.md section 6.11); the command line prints the same."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from runtime.decisions.case_sides import case_sides
from tests.cases.kinds import KINDS, NEEDS_EXAMPLE_AGENT, PLANNED, ROGUE
from tests.plugins.support import require_example_package

pytestmark = pytest.mark.django_db(transaction=True)


def _open(kind: str, directory: Path):
    if kind in NEEDS_EXAMPLE_AGENT:
        require_example_package()
    return KINDS[kind](directory)


def test_a_receipt_conflict_shows_both_argument_sets_and_their_diff(tmp_path: Path, ratchet_keys) -> None:
    sides = case_sides(case=_open("receipt_conflict", tmp_path))

    assert dict(sides.left.facts)["Target"] == dict(sides.right.facts)["Target"] == "limits.toml"
    # The content itself, line by line, on both sides of the diff.
    assert f"-  | {ROGUE.strip()}" in sides.diff and f"+  | {PLANNED.strip()}" in sides.diff
    assert "(none)" not in sides.diff_text and "(unknown)" not in str(sides.as_dict())
    assert sides.notes  # says the landed write came from outside this control plane


def test_an_adapter_refusal_shows_the_planned_write_and_the_refusal(tmp_path: Path, ratchet_keys) -> None:
    case = _open("adapter_refused", tmp_path)
    sides = case_sides(case=case)

    assert dict(sides.left.facts)["Action"] == "delete_file"
    assert "never-existed.txt" in sides.left.text
    assert dict(sides.right.facts)["Refusal"] == case.detail and case.detail
    assert not sides.comparable and sides.diff == []


def test_an_environment_drift_shows_checkpointed_against_observed(tmp_path: Path, ratchet_keys) -> None:
    sides = case_sides(case=_open("environment_drift", tmp_path))

    left, right = dict(sides.left.facts), dict(sides.right.facts)
    assert left["Fingerprint"] != right["Fingerprint"] and right["Fingerprint"] != "—"
    assert any("state_fingerprint" in line for line in sides.diff if line[:1] in "+-")


def test_a_planner_failure_shows_the_planners_error(tmp_path: Path, ratchet_keys) -> None:
    sides = case_sides(case=_open("planner_failed", tmp_path))

    right = dict(sides.right.facts)
    assert right["Error"] == "RuntimeError" and right["Message"] == "the model went away"
    assert "note-1" in sides.left.text  # the run's last write before the planner failed


def test_an_untrusted_receipt_shows_the_planned_write_beside_the_unapproved_one(tmp_path: Path,
                                                                                ratchet_keys) -> None:
    case = _open("untrusted_receipt", tmp_path)
    sides = case_sides(case=case)

    left, right = dict(sides.left.facts), dict(sides.right.facts)
    assert left["Target"] == right["Target"] == "limits.toml"
    assert left["Intent digest"] == right["Intent digest"] and right["Receipt"] != "—"
    assert right["Proposed by"] == f"run {case.run_id}"  # the run's own write, committed without its approval
    assert f"  | {PLANNED.strip()}" in sides.right.text and "approval digest" in sides.detail
    assert sides.comparable and sides.diff == []  # the same arguments: the approval is what is missing


def test_a_receipt_drift_shows_the_cached_receipt_beside_the_adapters(tmp_path: Path, ratchet_keys) -> None:
    case = _open("receipt_drift", tmp_path)
    sides = case_sides(case=case)

    left, right = dict(sides.left.facts), dict(sides.right.facts)
    assert sides.left.title == "Cached by the runtime" and left["Receipt"] == "edited-in-the-database"
    assert right["Receipt"] == case.receipt["receipt_id"] != "edited-in-the-database"
    assert left["Idempotency key"] == right["Idempotency key"] == case.pending["idempotency_key"]
    assert '+  "receipt_id": "edited-in-the-database",' in sides.diff
    assert "receipt_id" in sides.detail


def test_a_missing_receipt_shows_the_planned_write_beside_what_was_observed(tmp_path: Path,
                                                                           ratchet_keys) -> None:
    case = _open("receipt_missing", tmp_path)
    sides = case_sides(case=case)

    left, right = dict(sides.left.facts), dict(sides.right.facts)
    assert left["Target"] == "limits.toml" and f"  | {PLANNED.strip()}" in sides.left.text
    # What the write would produce is there, though the adapter holds no receipt for the key.
    assert right["Fingerprint"] == case.pending["expected_post_fingerprint"]
    assert sides.right.title == "Observed when the run froze (no receipt)" and not sides.comparable


def test_an_unknown_outcome_shows_the_planned_write_and_the_adapters_timeouts(tmp_path: Path,
                                                                             ratchet_keys) -> None:
    case = _open("outcome_unknown", tmp_path)
    sides = case_sides(case=case)

    left, right = dict(sides.left.facts), dict(sides.right.facts)
    assert left["Action"] == "commit" and left["Idempotency key"] == case.pending["idempotency_key"]
    assert right["Receipt"] == "none for this key" and right["Attempts timed out"] == "3"
    assert "timed out" in right["Last error"] and not sides.comparable


def test_a_verifier_error_shows_the_verifiers_error(tmp_path: Path, ratchet_keys) -> None:
    sides = case_sides(case=_open("verifier_error", tmp_path))

    right = dict(sides.right.facts)
    assert right["Error"] == "VerifierCommandNotFoundError"
    assert "ratchet-no-such-test-runner" in right["Message"]
    assert "answer.txt" in sides.left.text  # the run's last write before the verifier ran


def test_a_corrupt_ledger_shows_the_signed_head_and_the_bad_row(tmp_path: Path, ratchet_keys) -> None:
    case = _open("ledger_corrupt", tmp_path)
    sides = case_sides(case=case)

    left, right = dict(sides.left.facts), dict(sides.right.facts)
    assert right["Finding"] == case.detail and "ledger entry 1 was altered" in case.detail
    assert right["Ledger rows stored"] == "2" and "1 executed_write edited-in-the-database" in sides.right.text
    assert f"checkpoint generation {left['Checkpoint generation']}" in case.detail


def test_a_refused_restore_shows_the_stored_run_and_the_typed_refusal(tmp_path: Path, ratchet_keys) -> None:
    case = _open("restore_refused", tmp_path)
    sides = case_sides(case=case)

    left, right = dict(sides.left.facts), dict(sides.right.facts)
    assert right["Error"] == "BadSignatureError" and right["Refusal"] == case.detail
    assert left["Run row phase"] == case.observed["row_phase"] and left["Run row generation"] != "—"
    assert left["Newest traced event"] in sides.left.text and not sides.comparable


def test_changed_code_shows_the_stored_run_and_the_code_check(tmp_path: Path, ratchet_keys) -> None:
    case = _open("code_changed", tmp_path)
    sides = case_sides(case=case)

    right = dict(sides.right.facts)
    assert right["Error"] == "CodeDigestMismatchError" and right["Refusal"] == case.detail
    assert sides.right.title == "The code check's refusal" and "Run row phase" in dict(sides.left.facts)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cases_show_prints_reason_sides_and_diff(tmp_path: Path, ratchet_keys, kind: str) -> None:
    case = _open(kind, tmp_path)
    text, data = io.StringIO(), io.StringIO()

    call_command("cases", "show", case.case_id, stdout=text)
    call_command("cases", "show", case.case_id, "--json", stdout=data)

    shown = json.loads(data.getvalue())
    sides = case_sides(case=case)
    assert f"reason: {kind}" in text.getvalue()
    assert sides.left.title in text.getvalue() and sides.right.title in text.getvalue()
    assert shown["case"]["reason"] == kind
    if kind in ("ledger_corrupt", "restore_refused", "code_changed"):  # cases only the rows hold: no binding, said
        assert shown["binding"] is None and "no decision can be bound" in shown["binding_note"]
    else:
        assert shown["binding"]["case_id"] == case.case_id
    assert shown["sides"]["left"]["title"] == sides.left.title
    assert shown["sides"]["diff_text"] == sides.diff_text
    if sides.diff:
        assert sides.diff[0] in text.getvalue()
