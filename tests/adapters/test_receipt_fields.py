"""An admin browsing evidence reads a receipt that names who wrote what, when, under which
approval and fencing token, and which business object it produced (DESIGN.md section 6, trust
boundary)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from runtime.core.canonical import DigestKind, digest
from tests.adapters.support import Env, git

APPROVAL = digest(DigestKind.APPROVAL, {"approval_id": "a-1"})


def test_the_receipt_binds_namespace_time_approval_and_business_object(env: Env) -> None:
    start = datetime.now(UTC) - timedelta(seconds=2)

    receipt = env.execute(env.write("notes/todo.txt", b"ship it\n"), "key-1", token=3,
                          approval_digest=APPROVAL)

    assert receipt.namespace == f"{env.kind}:{env.adapter.instance_id()}"
    assert receipt.adapter_version == env.adapter.adapter_version
    assert receipt.fencing_token == 3
    assert receipt.approval_digest == APPROVAL
    assert receipt.committed_at is not None and receipt.committed_at.tzinfo is not None
    assert start <= receipt.committed_at <= datetime.now(UTC) + timedelta(seconds=2)
    if env.kind == "git":
        assert receipt.business_object == receipt.receipt_id == receipt.environment_version_after
        assert f"Approval-Digest: {APPROVAL}" in git(env.path, "log", "-1", "--format=%B")
    else:
        assert receipt.business_object == "notes/todo.txt"
        assert receipt.result["content"] == "sha256:" + hashlib.sha256(b"ship it\n").hexdigest()
    assert env.reopen().lookup_receipt("key-1") == receipt


def test_receipts_are_listed_oldest_first(env: Env) -> None:
    for i in range(3):
        env.execute(env.write(f"n{i}.txt", b"x\n"), f"key-{i}")

    listed = env.adapter.receipts()

    assert [r.idempotency_key for r in listed] == ["key-0", "key-1", "key-2"]
    assert listed[-1].environment_version_after == env.adapter.observe().version


def test_workspace_versions_count_committed_writes(workspace_env: Env) -> None:
    assert workspace_env.adapter.observe().version == "w0"

    receipt = workspace_env.execute(workspace_env.write("a.txt", b"a\n"), "key-a")

    assert (receipt.receipt_id, receipt.environment_version_after) == ("r1", "w1")
    assert workspace_env.adapter.observe().version == "w1"
