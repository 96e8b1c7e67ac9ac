"""Conflict evidence on the case page: the planned write beside the landed one, by content
(a receipt conflict is decided on content, not digests; DESIGN.md section 6.6)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.urls import reverse

from review.queries.conflict_evidence import MAX_CONTENT_BYTES, conflict_evidence
from runtime.adapters.git.adapter import GitAdapter
from runtime.core.checkpoint import Action
from runtime.evidence.attachments import attachment_get, attachment_put
from runtime.models import ReviewCase, Run
from tests.review.stories import conflict_run

pytestmark = pytest.mark.django_db(transaction=True)


def _git_repo(path: Path) -> Path:
    path.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": str(path)}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "README.md").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "README.md"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "init"], check=True, env=env)
    return path


def _commit(message: str, files: dict[str, bytes]) -> Action:
    return Action(kind="commit", target="", params={
        "message": message, "author_name": "Agent", "author_email": "agent@example.org",
        "author_date": "1700000000 +0000",
        "changes": [{"op": "write", "path": p, "content": attachment_put(data=data),
                     "executable": False} for p, data in files.items()],
    })


def _git_case(tmp_path: Path, planned: Action, landed: Action) -> ReviewCase:
    repo = _git_repo(tmp_path / "repo")
    adapter = GitAdapter(repo)
    receipt = adapter.execute(landed, idempotency_key="k-1", intent_digest=landed.intent_digest(),
                              fencing_token=1, blobs=lambda d: attachment_get(digest=d))
    run = Run(run_id="r-git", spec={"task": {"environment": {"adapter": "git"}}, "target": str(repo)})
    return ReviewCase(case_id="c-git", run=run, reason="receipt_conflict",
                      pending={"idempotency_key": "k-1", "intent_digest": planned.intent_digest(),
                               "action": planned.model_dump(mode="json")},
                      receipt=receipt.model_dump(mode="json"), environment={})


def test_it_shows_the_planned_commit_against_the_landed_commit(tmp_path, ratchet_keys) -> None:
    planned = _commit("Raise the order limit\n", {"limits.toml": b"max_orders = 5\n"})
    landed = _commit("Something else entirely\n", {"limits.toml": b"max_orders = 3\n"})
    evidence = conflict_evidence(case=_git_case(tmp_path, planned, landed))
    assert evidence.kind == "git" and not evidence.error
    assert evidence.planned_message == "Raise the order limit\n"
    assert evidence.landed_message.strip() == "Something else entirely"  # trailers stripped
    [file] = evidence.files
    assert (file.path, file.planned_op, file.landed_op, file.same) == (
        "limits.toml", "write", "added", False)
    lines = [(line.kind, line.text) for line in file.diff]
    assert ("del", "-max_orders = 3") in lines and ("add", "+max_orders = 5") in lines
    assert any("k-1" in s for s in evidence.summary) and any("differs" in s for s in evidence.summary)


def test_it_marks_binary_and_oversized_content_instead_of_showing_it(tmp_path, ratchet_keys) -> None:
    planned = _commit("m\n", {"blob.bin": b"\0\1\2", "big.txt": b"x" * (MAX_CONTENT_BYTES + 1)})
    landed = _commit("m\n", {"blob.bin": b"\0\1\3", "big.txt": b"y\n"})
    files = {f.path: f for f in conflict_evidence(case=_git_case(tmp_path, planned, landed)).files}
    assert files["blob.bin"].planned.state == "binary" and files["blob.bin"].diff == []
    assert files["big.txt"].planned.state == "too_large" and files["big.txt"].diff == []


@pytest.fixture
def conflict(tmp_path, ratchet_keys, enqueued):  # type: ignore[no-untyped-def]
    return conflict_run(tmp_path)


def test_it_shows_the_planned_content_against_the_file_on_disk(client_for, conflict) -> None:
    html = client_for("reviewer").get(reverse("review:case", args=[conflict.case_id])).content.decode()
    assert "Files: planned content against the file on disk" in html
    assert "on disk now: what the conflicting write left" in html
    assert '<span class="diff-del">-another caller&#x27;s bytes</span>' in html
    assert '<span class="diff-add">+A</span>' in html
    assert "<summary>Raw fields of the binding</summary>" in html


def test_it_escapes_content_and_does_not_follow_a_symlink_out(client_for, conflict, tmp_path) -> None:
    case = ReviewCase.objects.get(case_id=conflict.case_id)
    target = case.pending["action"]["target"]
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret\n")
    (conflict.workspace / target).unlink()
    (conflict.workspace / target).symlink_to(outside)
    [file] = conflict_evidence(case=case).files
    assert file.landed.state == "unreadable" and "symbolic link" in file.landed.note
    (conflict.workspace / target).unlink()
    (conflict.workspace / target).write_text("<script>alert(1)</script>\n")
    html = client_for("reviewer").get(reverse("review:case", args=[conflict.case_id])).content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert "top secret" not in html
