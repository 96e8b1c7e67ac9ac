"""Keyrings, HMAC and Ed25519 signing (DESIGN.md section 4.1).

Story: the operator runs four trust roots (checkpoints, approvals, reviewer decisions, bundle
exports); all but the checkpoint root are Ed25519, verified with public keys alone. Each
signs with its current key and verifies with any key it still trusts, so keys rotate; a MAC
made under one root or one key never verifies under another.
"""

from __future__ import annotations

import pickle

import pytest

from runtime.core.signing import (
    Keyring,
    PublicKey,
    SecretKey,
    Signature,
    TrustRoot,
    parse_keyring_spec,
)
from runtime.errors import BadSignatureError, KeyringError, UnknownKeyError
from tests.factories import make_keyring

MESSAGE = b'{"run_id":"r1","generation":4}'


def test_it_verifies_what_it_signed():
    keyring = make_keyring()
    signature = keyring.sign(MESSAGE)
    assert signature.key_id == "k1"
    assert len(signature.mac) == 64
    keyring.verify(MESSAGE, signature)


def test_it_rejects_a_mac_made_with_another_key_under_the_same_id():
    ours = make_keyring(key_ids=("k1",))
    attackers = make_keyring(key_ids=("k1",))
    with pytest.raises(BadSignatureError) as caught:
        ours.verify(MESSAGE, attackers.sign(MESSAGE))
    assert caught.value.context["key_id"] == "k1"


def test_it_rejects_an_unknown_key_id():
    ours = make_keyring(key_ids=("k1",))
    stranger = make_keyring(key_ids=("stranger-key",))
    with pytest.raises(UnknownKeyError) as caught:
        ours.verify(MESSAGE, stranger.sign(MESSAGE))
    assert caught.value.context == {"root": "checkpoint", "key_id": "stranger-key"}


def test_it_rejects_an_edited_message():
    keyring = make_keyring()
    signature = keyring.sign(MESSAGE)
    with pytest.raises(BadSignatureError):
        keyring.verify(MESSAGE.replace(b"4", b"5"), signature)


def test_it_still_verifies_with_a_rotated_out_key_until_it_is_retired():
    old, new = SecretKey.generate(), SecretKey.generate()
    before = Keyring(TrustRoot.CHECKPOINT, {"2025": old}, "2025")
    signed_last_year = before.sign(MESSAGE)

    after = Keyring(TrustRoot.CHECKPOINT, {"2026": new, "2025": old}, "2026")
    after.verify(MESSAGE, signed_last_year)
    assert after.sign(MESSAGE).key_id == "2026"

    retired = after.without(["2025"])
    with pytest.raises(UnknownKeyError):
        retired.verify(MESSAGE, signed_last_year)


def test_it_cannot_retire_the_current_key():
    with pytest.raises(KeyringError):
        make_keyring(key_ids=("k1", "k2")).without(["k1"])


def test_it_never_accepts_a_mac_across_trust_roots_even_with_the_same_key_bytes():
    # An operator pasted the same key into two roots: the root is inside the MAC anyway.
    shared = SecretKey.generate()
    checkpoint = Keyring(TrustRoot.CHECKPOINT, {"same": shared}, "same")
    approval = Keyring(TrustRoot.APPROVAL, {"same": shared}, "same")
    reviewer = Keyring(TrustRoot.REVIEWER, {"same": shared}, "same")
    macs = {kr.sign(MESSAGE).mac for kr in (checkpoint, approval, reviewer)}
    assert len(macs) == 3
    with pytest.raises(BadSignatureError):
        approval.verify(MESSAGE, checkpoint.sign(MESSAGE))
    with pytest.raises(BadSignatureError):
        reviewer.verify(MESSAGE, approval.sign(MESSAGE))


def test_it_binds_the_key_id_into_the_mac():
    # Same bytes under two ids: a MAC cannot be relabelled with the other id.
    shared = SecretKey.generate()
    keyring = Keyring(TrustRoot.CHECKPOINT, {"a": shared, "b": shared}, "a")
    signature = keyring.sign(MESSAGE)
    with pytest.raises(BadSignatureError):
        keyring.verify(MESSAGE, Signature(key_id="b", mac=signature.mac))


@pytest.mark.parametrize(
    "spelling",
    [str.upper, lambda m: m[:2] + " " + m[2:], lambda m: m[:-2], lambda m: m + "00",
     lambda m: None],
    ids=["upper-case", "with-space", "short", "long", "not-a-string"],
)
def test_it_accepts_a_mac_only_in_its_one_canonical_spelling(spelling):
    keyring = make_keyring()
    signature = keyring.sign(MESSAGE)
    with pytest.raises(BadSignatureError):
        keyring.verify(MESSAGE, Signature(key_id="k1", mac=spelling(signature.mac)))


def test_it_is_immutable_so_a_shared_keyring_never_switches_keys_midway():
    keyring = make_keyring(key_ids=("k1", "k2"))
    with pytest.raises(AttributeError):
        keyring.current_key_id = "k2"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        keyring.root = TrustRoot.APPROVAL  # type: ignore[misc]
    assert keyring.sign(MESSAGE).key_id == "k1"


def test_it_refuses_to_be_pickled_with_its_keys():
    with pytest.raises(TypeError):
        pickle.dumps(make_keyring())
    with pytest.raises(TypeError):
        pickle.dumps(SecretKey.generate())


@pytest.mark.parametrize("material", [b"", b"x" * 31, "a" * 40])
def test_it_refuses_short_or_non_bytes_keys(material):
    with pytest.raises(KeyringError):
        SecretKey(material)  # type: ignore[arg-type]


def test_it_round_trips_base64_key_text_padded_or_not():
    key = SecretKey.generate()
    text = key.to_b64()
    keyring = Keyring(TrustRoot.APPROVAL, {"k": key}, "k")
    signature = keyring.sign(MESSAGE)
    for spelling in (text, text + "=", " " + text + "\n"):
        again = Keyring(TrustRoot.APPROVAL, {"k": SecretKey.from_b64(spelling)}, "k")
        again.verify(MESSAGE, signature)


def test_it_refuses_key_text_with_stray_characters_instead_of_skipping_them():
    # The stdlib decoder silently drops characters outside the alphabet; a mangled key must
    # fail loudly rather than load as a different key.
    text = SecretKey.generate().to_b64()
    for mangled in (text[:10] + "!" + text[10:], text[:10] + "=" + text[10:], "", "===="):
        with pytest.raises(KeyringError):
            SecretKey.from_b64(mangled)


def test_it_parses_the_environment_spec_with_the_first_key_current():
    a, b = SecretKey.generate(), SecretKey.generate()
    keyring = parse_keyring_spec("reviewer", f"new:{a.to_b64()}, old:{b.to_b64()}")
    assert keyring.root is TrustRoot.REVIEWER
    assert keyring.key_ids == ("new", "old")
    assert keyring.current_key_id == "new"
    assert keyring.trusts("old") and not keyring.trusts("other")


@pytest.mark.parametrize(
    "spec",
    ["", " , ", "nokey", "kid:", ":abc", "k1:{a},k1:{a}", "bad id:{a}", "k1:tooshort"],
)
def test_it_rejects_malformed_specs_with_a_typed_error(spec):
    with pytest.raises(KeyringError):
        parse_keyring_spec("approval", spec.format(a=SecretKey.generate().to_b64()))


@pytest.mark.parametrize("key_id", ["", "a" * 65, "has space", "ünïcode", "a:b", None])
def test_it_rejects_malformed_key_ids(key_id):
    with pytest.raises(KeyringError):
        Keyring(TrustRoot.CHECKPOINT, {key_id: SecretKey.generate()}, key_id)  # type: ignore[dict-item]


def test_it_rejects_an_unknown_trust_root_or_a_missing_current_key():
    with pytest.raises(KeyringError):
        Keyring("payments", {"k": SecretKey.generate()}, "k")
    with pytest.raises(KeyringError):
        Keyring(TrustRoot.CHECKPOINT, {"k": SecretKey.generate()}, "other")
    with pytest.raises(KeyringError):
        Keyring(TrustRoot.CHECKPOINT, {}, "k")


# --- the asymmetric roots (Ed25519; DESIGN.md section 4.1) ------------------------------------


@pytest.mark.parametrize("root", [TrustRoot.APPROVAL, TrustRoot.REVIEWER, TrustRoot.EXPORT])
def test_it_verifies_an_ed25519_signature_with_the_public_key_alone(root):
    signer = Keyring(root, {"k": SecretKey.generate()}, "k")
    signature = signer.sign(MESSAGE)
    assert len(signature.mac) == 128
    public = signer.public()
    public.verify(MESSAGE, signature)
    assert not public.can_sign and signer.can_sign
    with pytest.raises(KeyringError, match="cannot sign"):
        public.sign(MESSAGE)
    with pytest.raises(BadSignatureError):
        public.verify(MESSAGE + b" ", signature)


def test_it_refuses_a_public_key_for_the_symmetric_checkpoint_root():
    public = PublicKey.of(SecretKey.generate())
    with pytest.raises(KeyringError):
        Keyring(TrustRoot.CHECKPOINT, {"k": public}, "k")  # type: ignore[dict-item]
    with pytest.raises(KeyringError, match="symmetric"):
        parse_keyring_spec("checkpoint", f"k:{public.to_b64()}", public=True)


def test_it_parses_a_public_key_spec_and_rotates():
    old, new = SecretKey.generate(), SecretKey.generate()
    signed_before = Keyring(TrustRoot.APPROVAL, {"old": old}, "old").sign(MESSAGE)
    public = parse_keyring_spec(
        "approval", f"new:{PublicKey.of(new).to_b64()},old:{PublicKey.of(old).to_b64()}", public=True)
    assert public.current_key_id == "new" and not public.can_sign
    public.verify(MESSAGE, signed_before)
    with pytest.raises(UnknownKeyError):
        public.without(["old"]).verify(MESSAGE, signed_before)


def test_it_never_accepts_an_ed25519_signature_across_roots_or_key_ids():
    seed = SecretKey.generate()
    approval = Keyring(TrustRoot.APPROVAL, {"a": seed, "b": seed}, "a")
    reviewer = Keyring(TrustRoot.REVIEWER, {"a": seed}, "a")
    signature = approval.sign(MESSAGE)
    with pytest.raises(BadSignatureError):
        reviewer.verify(MESSAGE, signature)
    with pytest.raises(BadSignatureError):
        approval.verify(MESSAGE, Signature(key_id="b", mac=signature.mac))


@pytest.mark.parametrize("mangle", [str.upper, lambda m: m[:64], lambda m: m + "00", lambda m: " " + m[1:]])
def test_it_refuses_a_malformed_ed25519_signature(mangle):
    ring = Keyring(TrustRoot.REVIEWER, {"k": SecretKey.generate()}, "k")
    signature = ring.sign(MESSAGE)
    with pytest.raises(BadSignatureError):
        ring.public().verify(MESSAGE, Signature(key_id="k", mac=mangle(signature.mac)))


def test_it_needs_a_32_byte_seed_for_an_asymmetric_root():
    with pytest.raises(KeyringError, match="32-byte"):
        Keyring(TrustRoot.APPROVAL, {"k": SecretKey(bytes(48))}, "k")
