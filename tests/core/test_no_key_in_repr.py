"""A key never appears in a checkpoint, a repr, a log line or an error message (DESIGN.md
section 4).

Story: an operator pastes keyring configuration, sometimes wrongly, and the runtime signs,
verifies and fails in every way it can while everything it prints is captured. The key's
base64 text, its hex and its raw bytes appear nowhere.
"""

from __future__ import annotations

import json
import logging
import pickle
import traceback

import pytest

from runtime.core.envelope import open_envelope, seal
from runtime.core.signing import Keyring, SecretKey, Signature, TrustRoot, parse_keyring_spec
from runtime.errors import RatchetError
from runtime.keys import reviewer_key_load
from tests.factories import make_state


def _material(key: SecretKey) -> bytes:
    return base64_decode(key.to_b64())


def base64_decode(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _spellings(key: SecretKey) -> list[str]:
    raw = _material(key)
    return [key.to_b64(), raw.hex(), raw.hex().upper(), repr(raw), raw.decode("latin-1")]


def _assert_secret_free(text: str, key: SecretKey) -> None:
    for spelling in _spellings(key):
        assert spelling not in text


@pytest.fixture
def key() -> SecretKey:
    return SecretKey.generate()


@pytest.fixture
def keyring(key: SecretKey) -> Keyring:
    return Keyring(TrustRoot.CHECKPOINT, {"ckpt-1": key, "ckpt-0": SecretKey.generate()}, "ckpt-1")


def test_it_redacts_keys_and_keyrings_in_repr_and_str(key, keyring):
    for obj in (key, keyring):
        _assert_secret_free(repr(obj) + str(obj) + f"{obj}" + f"{obj!r}", key)
    assert repr(key) == "SecretKey(<redacted>)"
    assert repr(keyring) == (
        "Keyring(root='checkpoint', key_ids=['ckpt-1', 'ckpt-0'], current='ckpt-1')"
    )
    assert not hasattr(key, "__dict__")  # nothing for vars() or a debugger's dict view to dump


def test_it_never_writes_the_key_into_a_checkpoint(key, keyring):
    raw, envelope = seal(make_state(), generation=1, keyring=keyring)
    _assert_secret_free(raw.decode("latin-1"), key)
    _assert_secret_free(repr(envelope) + envelope.model_dump_json(), key)


def test_it_keeps_keys_out_of_every_error_message(key, keyring):
    raw, _ = seal(make_state(), generation=1, keyring=keyring)
    body = json.loads(raw)
    body["generation"] = 2
    forged = json.dumps(body).encode()
    text = key.to_b64()
    failures = [
        lambda: open_envelope(forged, keyring=keyring),
        lambda: keyring.verify(b"m", Signature(key_id="ckpt-1", mac="0" * 64)),
        lambda: keyring.verify(b"m", Signature(key_id="ckpt-1", mac="zz")),
        lambda: keyring.verify(b"m", Signature(key_id="other", mac="0" * 64)),
        # Key text pasted where the key id goes, the halves of a spec swapped, junk added:
        lambda: keyring.verify(b"m", Signature(key_id=text, mac="0" * 64)),
        lambda: parse_keyring_spec("checkpoint", f"{text}:ckpt-1"),
        lambda: parse_keyring_spec("checkpoint", f"{text}"),
        lambda: parse_keyring_spec("checkpoint", f"ckpt-1:{text}!"),
        lambda: parse_keyring_spec("checkpoint", f"ckpt-1:{text[:20]}"),
        lambda: parse_keyring_spec("checkpoint", f"ckpt-1:{text},ckpt-1:{text}"),
        lambda: Keyring(TrustRoot.CHECKPOINT, {text: key}, text),
        lambda: Keyring(TrustRoot.CHECKPOINT, {"ok": key}, text),
        lambda: SecretKey.from_b64(text[:-5]),
    ]
    for fail in failures:
        with pytest.raises(RatchetError) as caught:
            fail()
        error = caught.value
        rendered = str(error) + repr(error) + repr(error.context) + "".join(
            traceback.format_exception(error)
        )
        _assert_secret_free(rendered, key)
        _assert_secret_free(str(pickle.loads(pickle.dumps(error))), key)


def test_it_logs_nothing_that_contains_a_key(caplog, key, keyring):
    caplog.set_level(logging.DEBUG)
    raw, _ = seal(make_state(), generation=1, keyring=keyring)
    open_envelope(raw, keyring=keyring)
    with pytest.raises(RatchetError):
        open_envelope(raw.replace(b'"generation":1', b'"generation":2'), keyring=keyring)
    logging.getLogger("runtime").exception("while handling %r with %s", keyring, key)
    assert "SecretKey(<redacted>)" in caplog.text
    _assert_secret_free(caplog.text, key)


def test_it_never_shows_an_ed25519_seed_in_reprs_errors_or_the_public_key(key, tmp_path):
    signer = Keyring(TrustRoot.REVIEWER, {"rev-1": key}, "rev-1")
    public = signer.public()
    texts = [repr(signer), repr(public), repr(public.public_keys()["rev-1"])]
    try:
        public.sign(b"decision")
    except RatchetError as exc:
        texts.append(str(exc))
    for mangled in (f"rev-1:{key.to_b64()}!", f"{key.to_b64()}:rev-1"):
        try:
            parse_keyring_spec("reviewer", mangled)
        except RatchetError as exc:
            texts.append(str(exc))
    broken = tmp_path / "alice.json"
    broken.write_text('{"format": "ratchet-reviewer-key/1", "reviewer": "alice", "key_id": "k", '
                      f'"private": "{key.to_b64()[:-3]}"}}')
    try:
        reviewer_key_load(broken)
    except RatchetError as exc:
        texts.append(str(exc))
    assert len(texts) == 7
    _assert_secret_free("\n".join(texts), key)
