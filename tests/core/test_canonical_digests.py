"""Canonical JSON (RFC 8785) and typed digests (DESIGN.md sections 3 and 5).

A digest must depend on the value only (not on dict order, float spelling or who computes it),
must never be confusable across kinds (an intent digest is not a receipt digest of the same
bytes), and anything that is not plain JSON must be refused with a typed error.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from runtime.core.canonical import (
    DigestKind,
    canonical_json,
    check_digest,
    digest,
    digest_bytes,
)
from runtime.core.checkpoint import Action, Receipt, Risk
from runtime.errors import CanonicalizationError, DigestFormatError, UnknownDigestKindError


def test_it_sorts_keys_by_utf16_code_units_and_drops_whitespace():
    # RFC 8785 section 3.2.3: keys sort by UTF-16 code units, so U+1F600 (a surrogate pair
    # starting 0xD83D) sorts before U+FFFF, and "z" before "é".
    value = {"\uffff": 4, "\U0001f600": 3, "é": 2, "z": 1}
    assert canonical_json(value) == '{"z":1,"é":2,"\U0001f600":3,"\uffff":4}'.encode()


def test_it_spells_numbers_the_ecmascript_way():
    assert canonical_json([1.0, -0.0, 1e21, 1e-7, 0.1, 100]) == b"[1,0,1e+21,1e-7,0.1,100]"


def test_it_gives_the_same_digest_whatever_the_dict_order():
    a = {"kind": "write_file", "params": {"b": 2, "a": 1}}
    b = {"params": {"a": 1, "b": 2}, "kind": "write_file"}
    assert digest(DigestKind.INTENT, a) == digest(DigestKind.INTENT, b)


def test_it_spells_digests_as_sha256_and_64_lowercase_hex():
    value = digest(DigestKind.SCENARIO, {"task": "t"})
    assert value.startswith("sha256:")
    assert check_digest(value) == value
    assert len(value) == len("sha256:") + 64


def test_it_never_confuses_digests_of_different_kinds():
    value = {"idempotency_key": "k", "intent_digest": "x"}
    digests = {digest(kind, value) for kind in DigestKind}
    assert len(digests) == len(DigestKind)
    # Nor is a typed digest the plain hash of the canonical bytes.
    assert digest(DigestKind.INTENT, value) != digest_bytes(canonical_json(value))


def test_it_hashes_the_kind_tag_then_a_separator_then_the_canonical_bytes():
    value = {"a": [1, "b"]}
    expected = hashlib.sha256(b"receipt\x00" + canonical_json(value)).hexdigest()
    assert digest(DigestKind.RECEIPT, value) == "sha256:" + expected


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        {"n": 2**53},
        {1: "non-str key"},
        {"s": {1, 2}},
        {"b": b"bytes"},
        {"d": Decimal("1.5")},
        {"t": datetime(2026, 1, 1, tzinfo=UTC)},
        {"o": object()},
        "\ud800",
    ],
    ids=["nan", "inf", "int-beyond-2**53", "int-key", "set", "bytes", "decimal", "datetime",
         "object", "lone-surrogate"],
)
def test_it_refuses_values_that_are_not_plain_json(value):
    with pytest.raises(CanonicalizationError):
        canonical_json(value)
    with pytest.raises(CanonicalizationError):
        digest(DigestKind.INTENT, value)


def test_it_refuses_absurdly_deep_nesting_with_a_typed_error():
    value: dict = {}
    for _ in range(50_000):
        value = {"a": value}
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


@pytest.mark.parametrize(
    "text",
    ["sha256:" + "A" * 64, "sha256:" + "0" * 63, "md5:" + "0" * 64, "0" * 64, "", None, 7],
)
def test_it_rejects_malformed_digests(text):
    with pytest.raises(DigestFormatError):
        check_digest(text)


def test_it_rejects_an_unknown_digest_kind_with_a_typed_error():
    with pytest.raises(UnknownDigestKindError):
        digest("checkpoint-ish", {"a": 1})


def test_it_refuses_to_content_address_text_instead_of_bytes():
    with pytest.raises(CanonicalizationError):
        digest_bytes("not bytes")  # type: ignore[arg-type]
    same = {digest_bytes(b"abc"), digest_bytes(bytearray(b"abc")), digest_bytes(memoryview(b"abc"))}
    assert len(same) == 1


def test_it_gives_an_intent_digest_that_changes_with_any_parameter():
    base = Action(kind="write_file", target="a.txt", params={"content": "x"})
    twin = Action(kind="write_file", target="a.txt", params={"content": "x"})
    assert base.intent_digest() == twin.intent_digest()
    assert base.intent_digest() != base.model_copy(update={"target": "b.txt"}).intent_digest()
    assert base.intent_digest() != base.model_copy(update={"params": {"c": "y"}}).intent_digest()
    assert base.intent_digest() != base.model_copy(update={"risk": Risk.HIGH}).intent_digest()


def test_it_fingerprints_every_field_of_a_receipt():
    receipt = Receipt(
        namespace="workspace",
        adapter_version="1",
        receipt_id="r1",
        idempotency_key="k1",
        intent_digest=digest(DigestKind.INTENT, {"a": 1}),
        result={"ok": True},
        environment_version_after="v1",
        fencing_token=3,
    )
    changes = {
        "namespace": "other",
        "adapter_version": "2",
        "receipt_id": "r2",
        "idempotency_key": "k2",
        "intent_digest": digest(DigestKind.INTENT, {"a": 2}),
        "result": {"ok": False},
        "environment_version_after": "v2",
        "fencing_token": 4,
        "committed_at": datetime(2026, 1, 1, tzinfo=UTC),
        "approval_digest": digest(DigestKind.APPROVAL, {"a": 1}),
        "business_object": "order-1",
    }
    assert set(changes) == set(Receipt.model_fields)
    for field, value in changes.items():
        changed = receipt.model_copy(update={field: value})
        assert changed.fingerprint() != receipt.fingerprint(), field
