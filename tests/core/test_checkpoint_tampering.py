"""Opening a stored checkpoint fails closed on any corruption or forgery (DESIGN.md section 4).

Story: a stranger with write access to the checkpoint store edits a checkpoint, or the disk
flips bits. A plain SHA-256 would catch the disk but not the stranger, who simply recomputes it;
the HMAC under a key that never lives in the checkpoint catches both. Every failure is a typed
error, and a checkpoint signed by a key the operator rotated out but still trusts opens fine.
"""

from __future__ import annotations

import json
import random

import pytest

from runtime.core.canonical import DigestKind, canonical_json, digest, digest_bytes
from runtime.core.checkpoint import LedgerHead, Phase
from runtime.core.envelope import envelope_digest, open_envelope, seal
from runtime.core.signing import Keyring, SecretKey, TrustRoot
from runtime.errors import (
    BadSignatureError,
    CheckpointCorruptError,
    CheckpointInvariantError,
    RatchetError,
    SigningError,
    UnknownKeyError,
    WrongTrustRootError,
)
from tests.core import builders as b
from tests.core.v1_checkpoints import sign_body
from tests.factories import make_keyring, make_state


@pytest.fixture
def keyring() -> Keyring:
    return make_keyring(key_ids=("ckpt-2026",))


@pytest.fixture
def sealed(keyring: Keyring) -> bytes:
    state = make_state(run_id="run-tamper")
    state.pending = b.pending_for(state)
    state.phase = Phase.PENDING
    state.ledger = LedgerHead(length=1, head=digest(DigestKind.LEDGER, {"entry": "ik-0"}))
    raw, _ = seal(state, generation=4, keyring=keyring)
    return raw


def test_it_opens_an_untouched_checkpoint(sealed, keyring):
    envelope = open_envelope(sealed, keyring=keyring)
    assert (envelope.run_id, envelope.generation, envelope.key_id) == ("run-tamper", 4, "ckpt-2026")
    assert open_envelope(bytearray(sealed), keyring=keyring) == envelope
    assert open_envelope(memoryview(sealed), keyring=keyring) == envelope


def test_it_detects_random_corruption_anywhere_in_the_bytes(sealed, keyring):
    rng = random.Random(8785)  # fixed seed: a failure reproduces
    positions = rng.sample(range(len(sealed)), 200) + [0, len(sealed) - 1]
    for position in positions:
        corrupt = bytearray(sealed)
        corrupt[position] ^= 1 << rng.randrange(8)
        with pytest.raises((CheckpointCorruptError, SigningError)):
            open_envelope(bytes(corrupt), keyring=keyring)
    for cut in (1, len(sealed) // 2, len(sealed) - 1):
        with pytest.raises(CheckpointCorruptError):
            open_envelope(sealed[:cut], keyring=keyring)


def test_it_rejects_an_edited_payload_even_with_its_plain_sha256_recomputed(sealed, keyring):
    body = json.loads(sealed)
    body["payload"]["ledger"] = {"length": 0, "head": None}  # "the write never happened"
    edited = canonical_json(body)
    recomputed = digest_bytes(edited)  # what a plain-hash scheme would store next to it
    assert recomputed == envelope_digest(edited) != envelope_digest(sealed)
    with pytest.raises(BadSignatureError) as caught:
        open_envelope(edited, keyring=keyring)
    assert caught.value.context == {"root": "checkpoint", "key_id": "ckpt-2026"}


@pytest.mark.parametrize(
    ("field", "value"),
    [("generation", 5), ("run_id", "run-other"), ("schema_version", 1),
     ("created_at", "2020-01-01T00:00:00Z")],
)
def test_it_rejects_an_edited_envelope_field(sealed, keyring, field, value):
    body = json.loads(sealed)
    body[field] = value
    with pytest.raises(BadSignatureError):
        open_envelope(canonical_json(body), keyring=keyring)


def test_it_rejects_a_checkpoint_signed_with_another_key_of_the_same_id(sealed):
    impostor = make_keyring(key_ids=("ckpt-2026",))
    with pytest.raises(BadSignatureError):
        open_envelope(sealed, keyring=impostor)


def test_it_rejects_a_checkpoint_signed_with_an_unknown_key_id(keyring):
    stranger = make_keyring(key_ids=("stranger",))
    raw, _ = seal(make_state(), generation=1, keyring=stranger)
    with pytest.raises(UnknownKeyError) as caught:
        open_envelope(raw, keyring=keyring)
    assert caught.value.context["key_id"] == "stranger"


def test_it_rejects_a_relabelled_key_id(sealed, keyring):
    keys = {"ckpt-2026": SecretKey.generate(), "other": SecretKey.generate()}
    both = Keyring(TrustRoot.CHECKPOINT, keys, "other")
    body = json.loads(sealed)
    body["key_id"] = "other"
    with pytest.raises(BadSignatureError):
        open_envelope(canonical_json(body), keyring=both)


def test_it_still_opens_a_checkpoint_signed_with_a_rotated_out_key():
    old, new = SecretKey.generate(), SecretKey.generate()
    before = Keyring(TrustRoot.CHECKPOINT, {"ckpt-2025": old}, "ckpt-2025")
    raw, _ = seal(make_state(run_id="run-rotate"), generation=9, keyring=before)

    after = Keyring(TrustRoot.CHECKPOINT, {"ckpt-2026": new, "ckpt-2025": old}, "ckpt-2026")
    assert open_envelope(raw, keyring=after).key_id == "ckpt-2025"
    resealed, envelope = seal(make_state(run_id="run-rotate"), generation=10, keyring=after)
    assert envelope.key_id == "ckpt-2026"
    open_envelope(resealed, keyring=after)

    with pytest.raises(UnknownKeyError):
        open_envelope(raw, keyring=after.without(["ckpt-2025"]))


def test_it_rejects_a_mac_lifted_from_another_checkpoint(keyring):
    first, _ = seal(make_state(run_id="run-a"), generation=1, keyring=keyring)
    second, _ = seal(make_state(run_id="run-a"), generation=2, keyring=keyring)
    body = json.loads(second)
    body["mac"] = json.loads(first)["mac"]
    with pytest.raises(BadSignatureError):
        open_envelope(canonical_json(body), keyring=keyring)


def test_it_rejects_a_checkpoint_verified_under_another_trust_root(sealed):
    with pytest.raises(WrongTrustRootError):
        open_envelope(sealed, keyring=make_keyring("approval", key_ids=("ckpt-2026",)))


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b"[]", b'"text"', b"\xff\xfe\x00", b'{"key_id": "k"}', b'{"mac": "00"}',
     b'{"key_id": 1, "mac": "00"}', b'{"key_id":"k","mac":"00","x":NaN}', b"[" * 100_000],
    ids=["empty", "not-json", "array", "string", "bad-utf8", "no-mac", "no-key-id", "int-key-id",
         "nan", "deep"],
)
def test_it_rejects_bytes_that_are_not_an_envelope(raw, keyring):
    with pytest.raises(CheckpointCorruptError):
        open_envelope(raw, keyring=keyring)


def test_it_rejects_a_non_bytes_checkpoint(sealed, keyring):
    with pytest.raises(CheckpointCorruptError):
        open_envelope(sealed.decode(), keyring=keyring)  # type: ignore[arg-type]


def test_it_rejects_a_repeated_json_key_even_under_a_valid_mac(sealed, keyring):
    # The MAC covers what json.loads keeps (the last copy); another reader might keep the first.
    text = sealed.decode()
    doubled = text.replace('"generation":4', '"generation":3,"generation":4', 1)
    assert doubled != text
    with pytest.raises(CheckpointCorruptError):
        open_envelope(doubled.encode(), keyring=keyring)


def test_it_rejects_an_envelope_whose_identity_disagrees_with_its_payload(sealed, keyring):
    """Signed by the real key (a buggy writer), so only the cross-check can catch it."""
    body = json.loads(sealed)
    del body["mac"]
    body["environment_instance_id"] = "env-elsewhere"
    with pytest.raises(CheckpointInvariantError):
        open_envelope(sign_body(body, keyring), keyring=keyring)


def test_it_fails_every_way_with_a_ratchet_error_never_a_crash(sealed, keyring):
    rng = random.Random(2024)
    for _ in range(100):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        with pytest.raises(RatchetError):
            open_envelope(junk, keyring=keyring)
