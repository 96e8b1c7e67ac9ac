"""The attachment store hands back bytes that do not match the digest the action names (a
corrupted or swapped attachment). The adapter checks sha256 before writing anything."""

from __future__ import annotations

import hashlib

import pytest

from runtime.core.checkpoint import Action
from runtime.errors import BlobDigestMismatchError, BlobUnavailableError
from tests.adapters.support import Env


def test_it_rejects_content_whose_digest_does_not_match(env: Env) -> None:
    digest = env.blobs.put(b"what was approved\n")
    (env.blobs.root / digest.removeprefix("sha256:")).write_bytes(b"what an attacker swapped in\n")
    action = Action(kind="write_file", target="notes/todo.txt", params={"content": digest})
    before = env.adapter.observe()

    with pytest.raises(BlobDigestMismatchError) as caught:
        env.execute(action, "key-1")
    with pytest.raises(BlobDigestMismatchError):
        env.adapter.predict_post_state(action, blobs=env.blobs)

    assert caught.value.context["expected"] == digest
    assert not (env.path / "notes").exists()
    after = env.adapter.observe()
    assert (after.version, after.state_fingerprint) == (before.version, before.state_fingerprint)
    assert env.adapter.lookup_receipt("key-1") is None


def test_it_reports_a_missing_blob_as_unavailable(env: Env) -> None:
    missing = "sha256:" + hashlib.sha256(b"never stored").hexdigest()
    action = Action(kind="write_file", target="notes/todo.txt", params={"content": missing})

    with pytest.raises(BlobUnavailableError):
        env.execute(action, "key-1")

    assert env.adapter.receipts() == []
