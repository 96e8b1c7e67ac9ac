"""The checkpoint schema (DESIGN.md section 3): typed, strict, complete, unknown fields rejected.

Story: a worker checkpoints a run. The checkpoint must hold everything needed to resume exactly
(identity, versions, budgets, environment, pending action, receipts, scope, preconditions,
verifier results, review cases, nonces), never a transcript of model messages, and anything
invalid or unserialisable is refused before a MAC is ever computed.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

import pytest
from pydantic import ValidationError

from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import SCHEMA_VERSION, Phase, RunState
from runtime.core.envelope import CheckpointEnvelope, open_envelope, seal
from runtime.core.invariants import validate_state
from runtime.core.signing import Keyring
from runtime.errors import (
    CanonicalizationError,
    CheckpointInvariantError,
    CheckpointSchemaError,
    WrongTrustRootError,
)
from tests.core.v1_checkpoints import sign_body
from tests.factories import make_keyring, make_state


def _sealed_body(state: RunState | None = None) -> tuple[dict, Keyring]:
    keyring = make_keyring()
    raw, _ = seal(state or make_state(run_id="run-schema"), generation=1, keyring=keyring)
    return json.loads(raw), keyring


def _resign(body: dict, keyring: Keyring) -> bytes:
    """A writer holding the real key produced this body: only the schema can stop it."""
    return sign_body({k: v for k, v in body.items() if k != "mac"}, keyring)


def test_it_round_trips_a_valid_state_unchanged():
    state = make_state(run_id="run-schema")
    raw, envelope = seal(state, generation=5, keyring=make_keyring())
    assert envelope.schema_version == SCHEMA_VERSION
    assert envelope.generation == 5
    assert envelope.payload == validate_state(state)
    assert raw == canonical_json(json.loads(raw))


def test_it_rejects_a_checkpoint_that_holds_only_model_messages():
    """DESIGN.md section 7: "checkpoint holds only model messages"."""
    body, keyring = _sealed_body()
    body["payload"] = {
        "messages": [
            {"role": "user", "content": "update the todo list"},
            {"role": "assistant", "content": "I wrote the file."},
        ]
    }
    with pytest.raises(CheckpointSchemaError) as caught:
        open_envelope(_resign(body, keyring), keyring=keyring)
    message = str(caught.value)
    assert "payload.messages: Extra inputs are not permitted" in message
    assert "payload.identity: Field required" in message


@pytest.mark.parametrize(
    "path",
    [
        ("identity", "policy_version"),
        ("scope", "policy_version"),
        ("scope", "permissions"),
        ("scope", "preconditions"),
        ("ledger",),
        ("ledger", "head"),
        ("verifier_results",),
        ("review_cases",),
        ("environment", "state_fingerprint"),
        ("versions", "inputs"),
        ("usage",),
        ("pending",),
        ("stop_reason",),
    ],
    ids=lambda p: ".".join(p),
)
def test_it_rejects_a_checkpoint_missing_what_resuming_needs(path):
    """Even fields with defaults must be present: a missing receipts list is not "no receipts"."""
    body, keyring = _sealed_body()
    node = body["payload"]
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    with pytest.raises(CheckpointSchemaError) as caught:
        open_envelope(_resign(body, keyring), keyring=keyring)
    assert path[-1] in str(caught.value)


@pytest.mark.parametrize(
    "where",
    ["envelope", "payload", "identity", "environment", "scope", "limits"],
)
def test_it_rejects_an_unknown_field_anywhere(where):
    body, keyring = _sealed_body()
    targets = {"envelope": body, "payload": body["payload"]}
    target = targets.get(where) or body["payload"][where]
    target["chat_history"] = ["hello"]
    with pytest.raises(CheckpointSchemaError) as caught:
        open_envelope(_resign(body, keyring), keyring=keyring)
    assert "chat_history" in str(caught.value)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("cursor",), "3"),
        (("cursor",), True),
        (("cursor",), -1),
        (("phase",), "paused"),
        (("limits", "cost_micros"), 0.5),
        (("environment", "state_fingerprint"), "sha256:not-hex"),
        (("started_at",), "2026-01-01T00:00:00"),
        (("identity", "run_id"), ""),
    ],
    ids=["str-for-int", "bool-for-int", "negative", "unknown-phase", "float-for-int",
         "bad-digest", "naive-datetime", "empty-id"],
)
def test_it_rejects_wrong_types_without_coercing(path, value):
    body, keyring = _sealed_body()
    node = body["payload"]
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    with pytest.raises(CheckpointSchemaError):
        open_envelope(_resign(body, keyring), keyring=keyring)


def test_it_rejects_an_unknown_field_in_the_python_models_too():
    with pytest.raises(ValidationError):
        RunState.model_validate({**make_state().model_dump(), "messages": []})
    with pytest.raises(ValidationError):
        RunState(**make_state().model_dump(), transcript="...")


@pytest.mark.parametrize(
    "poison",
    [{1, 2}, b"raw", Decimal("0.1"), (1, 2), object(), float("nan"), 2**60],
    ids=["set", "bytes", "decimal", "tuple", "object", "nan", "huge-int"],
)
def test_it_refuses_an_unserialisable_value_before_signing(monkeypatch, poison):
    signed: list[bytes] = []
    monkeypatch.setattr(Keyring, "sign", lambda self, message: signed.append(message))
    state = make_state()
    state.planner_state["scratch"] = poison  # mutated in place: no validation on assignment
    with pytest.raises(CanonicalizationError):
        seal(state, generation=1, keyring=make_keyring())
    assert signed == []


def test_it_refuses_an_in_place_edit_of_the_wrong_type_before_signing(monkeypatch):
    signed: list[bytes] = []
    monkeypatch.setattr(Keyring, "sign", lambda self, message: signed.append(message))
    state = make_state()
    state.verifier_results.append("it passed")  # type: ignore[arg-type]
    with pytest.raises(CheckpointSchemaError):
        seal(state, generation=1, keyring=make_keyring())
    assert signed == []


def test_it_refuses_an_invalid_state_before_signing(monkeypatch):
    signed: list[bytes] = []
    monkeypatch.setattr(Keyring, "sign", lambda self, message: signed.append(message))
    state = make_state(phase=Phase.PENDING)  # pending phase, no pending action
    with pytest.raises(CheckpointInvariantError):
        seal(state, generation=1, keyring=make_keyring())
    assert signed == []


@pytest.mark.parametrize(
    "kwargs",
    [{"generation": 0}, {"generation": True}, {"generation": "2"},
     {"generation": 1, "created_at": datetime(2026, 1, 1)}],
    ids=["zero", "bool", "str", "naive-created-at"],
)
def test_it_refuses_a_bad_generation_or_timestamp_before_signing(monkeypatch, kwargs):
    signed: list[bytes] = []
    monkeypatch.setattr(Keyring, "sign", lambda self, message: signed.append(message))
    with pytest.raises(CheckpointSchemaError):
        seal(make_state(), keyring=make_keyring(), **kwargs)
    assert signed == []


def test_it_refuses_to_seal_with_another_trust_roots_keyring():
    with pytest.raises(WrongTrustRootError):
        seal(make_state(), generation=1, keyring=make_keyring("approval"))
    with pytest.raises(ValueError):  # still a ValueError, as callers written earlier expect
        seal(make_state(), generation=1, keyring=make_keyring("reviewer"))


def test_it_returns_an_independent_copy_so_later_edits_cannot_reach_the_sealed_one():
    state = make_state()
    _, envelope = seal(state, generation=1, keyring=make_keyring())
    state.planner_state["later"] = 1
    state.cursor = 9
    assert "later" not in envelope.payload.planner_state
    assert envelope.payload.cursor == 0


def test_it_keeps_the_envelope_identity_consistent_with_the_payload():
    state = make_state(run_id="run-identity", instance_id="env-42")
    _, envelope = seal(state, generation=3, keyring=make_keyring())
    assert (envelope.run_id, envelope.environment_instance_id) == ("run-identity", "env-42")
    assert set(CheckpointEnvelope.model_fields) == {
        "schema_version", "run_id", "tenant_id", "task_id", "environment_instance_id",
        "generation", "created_at", "key_id", "mac", "payload",
    }
