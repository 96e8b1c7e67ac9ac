"""Story: an operator replays a history whose messages end in trailer blocks and whose headers
git's own parser reads oddly, through the engine, on the configured database (CI runs it on
SQLite and PostgreSQL). Every replayed commit is then read with plain git: its header after the
tree and parents is the source's byte for byte, its message is the source's bytes around the
receipt lines, and ``git interpret-trailers --parse`` (and ``git log``'s trailer parse) of it is
the source's trailers followed by Ratchet's (DESIGN.md section 5.16).

The history (``tests/helpers/git_cases.py``, twenty-two commits): ``Co-authored-by`` and a trailing
``Signed-off-by``, a block without a final newline, ``(cherry picked from commit ...)`` lines, a
mixed block that is one only by git's 25% rule, a last paragraph that is not a block, blank lines
and an old ``Conflicts:`` block after a block, a folded trailer, an author line
``Name<email> <none@none>``, a committer line without a date, and ``mergetag`` and ``gpgsig``
headers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.support import run_target, write_replay_task
from tests.helpers.git_cases import build_trailer_repo, first_parent_count
from tests.helpers.replay_fidelity import check_replay, git, parse_trailers


@pytest.mark.django_db(transaction=True)
def test_the_replay_keeps_every_source_trailer_and_header(tmp_path: Path, ratchet_keys: dict) -> None:
    from runtime.engine import run_advance, run_start

    source = build_trailer_repo(tmp_path / "source")
    count = first_parent_count(source) - 1
    task = write_replay_task(tmp_path / "replay", source, count=count, budget=count + 5)

    run_id = run_start(spec_path=task)
    report = run_advance(run_id=run_id)

    assert report.phase == "completed", report
    target = run_target(run_id)
    base = git(source, "rev-parse", f"HEAD~{count}").decode().strip()
    tip = git(source, "rev-parse", "HEAD").decode().strip()
    assert check_replay(source, base, tip, target) == {}
    # Spelled out for one commit: the cherry-pick and sign-off stay trailers, Ratchet's follow.
    sha = git(target, "log", "-1", "--format=%H", "--grep=Backport a fix").decode().strip()
    message = git(target, "cat-file", "commit", sha).split(b"\n\n", 1)[1]
    parsed = parse_trailers(message)
    assert parsed[0] == "Signed-off-by: Ada Lovelace <ada@example.org>"
    assert [line.split(":")[0] for line in parsed[1:]] == [
        "Idempotency-Key", "Intent-Digest", "Fencing-Token", "Committed-At"]
    ambiguous = git(target, "log", "-1", "--format=%H", "--grep=ambiguously").decode().strip()
    assert b"\nauthor Name<email> <none@none> 1700100000 +0000\n" in git(target, "cat-file", "commit",
                                                                          ambiguous)
