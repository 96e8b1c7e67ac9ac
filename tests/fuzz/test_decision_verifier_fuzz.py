"""The decision verifier never accepts a changed decision and fails only typed (DESIGN.md section 7).

Story: a signed reviewer decision arrives as a file (``manage.py cases decide
--file``) or a form post. Decoded from arbitrary bytes it is either refused by its schema or
checked by ``decision_verify``; a valid decision with any one field replaced by any value the
schema still accepts never verifies: ``decision_verify`` raises a ``SigningError`` and nothing
else. The decoding step is the schema's (pydantic's ``ValidationError``, a ``ValueError`` the
command turns into its error message); everything after it is Ratchet's typed errors.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import ValidationError

from runtime.core.canonical import DigestKind, digest
from runtime.core.checkpoint import DecisionKind, SignedDecision
from runtime.core.evidence import decision_sign, decision_verify
from runtime.core.signing import TrustRoot
from runtime.errors import RatchetError, SigningError
from tests.factories import make_keyring
from tests.fuzz.profiles import JSON_VALUES, QUICK, THOROUGH

REVIEWER = make_keyring(TrustRoot.REVIEWER, ("reviewer-fuzz",))
BINDING: dict[str, Any] = {
    "case_id": "case_" + "1" * 32, "decision": DecisionKind.REPLAN, "reviewer": "rita",
    "task_id": "t1", "task_version": "1", "run_id": "run-fuzz", "policy_id": "p1",
    "policy_version": "1", "action_kind": "write_file", "action_target": "notes.md",
    "idempotency_key": "ik-1", "pending_intent_digest": digest(DigestKind.INTENT, {"a": 1}),
    "receipt_intent_digest": digest(DigestKind.INTENT, {"a": 2}),
    "receipt_fingerprint": digest(DigestKind.RECEIPT, {"r": 1}),
    "environment_instance_id": "env-1", "environment_version": "v1",
    "environment_fingerprint": digest(DigestKind.ENVIRONMENT, {"e": 1}),
    "nonce": "n" * 32, "issued_at": datetime(2026, 1, 1, tzinfo=UTC),
}
SIGNED = decision_sign(keyring=REVIEWER, binding=BINDING)
SIGNED_JSON = json.loads(SIGNED.model_dump_json())
FIELDS = sorted(SIGNED_JSON)


def _decode_and_verify(raw: bytes) -> None:
    try:
        decision = SignedDecision.model_validate_json(raw, strict=False)
    except ValidationError:
        return  # refused by the schema before any check; the caller reports it
    try:
        decision_verify(decision, REVIEWER)
    except RatchetError:
        pass


def check_one_field_changed(field: str, value: Any) -> None:
    assume(value != SIGNED_JSON[field])
    try:
        changed = SignedDecision.model_validate({**SIGNED_JSON, field: value}, strict=False)
    except ValidationError:
        return
    assume(changed != SIGNED)  # the schema may normalise a value back to the signed one
    with pytest.raises(SigningError):
        decision_verify(changed, REVIEWER)


def test_the_untouched_decision_verifies() -> None:
    decision_verify(SignedDecision.model_validate_json(SIGNED.model_dump_json()), REVIEWER)


@QUICK
@given(st.binary(max_size=600))
def test_it_fails_typed_for_arbitrary_bytes(raw: bytes) -> None:
    _decode_and_verify(raw)


@QUICK
@given(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=6))
def test_it_fails_typed_for_a_decision_with_fields_overwritten(changes: dict[str, Any]) -> None:
    _decode_and_verify(json.dumps({**SIGNED_JSON, **changes}).encode())


@QUICK
@given(st.sampled_from([f for f in FIELDS if f != "key_id"]), st.text(min_size=1, max_size=80) | JSON_VALUES)
def test_it_never_verifies_a_decision_with_one_field_changed(field: str, value: Any) -> None:
    check_one_field_changed(field, value)


@pytest.mark.slow
@THOROUGH
@given(st.binary(max_size=3000), st.sampled_from([f for f in FIELDS if f != "key_id"]),
       st.text(min_size=1, max_size=200) | JSON_VALUES)
def test_it_holds_for_many_decisions(raw: bytes, field: str, value: Any) -> None:
    _decode_and_verify(raw)
    check_one_field_changed(field, value)
