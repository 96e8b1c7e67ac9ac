"""Story: the acceptance audit is not a rubber stamp. After a clean replay, someone adds a second
commit for an existing key and then a commit with no key at all: the audit names each violation,
reading the target with plain git only."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.models import Run
from runtime.replay_check.acceptance import replay_check_run
from runtime.replay_check.audit import replay_audit
from runtime.replay_check.repository import git, replay_range
from tests.helpers.procs import child_env

pytestmark = pytest.mark.django_db(transaction=True)

_WHO = {"GIT_AUTHOR_NAME": "mallory", "GIT_AUTHOR_EMAIL": "m@example.org",
        "GIT_COMMITTER_NAME": "mallory", "GIT_COMMITTER_EMAIL": "m@example.org"}


def _failed(audit) -> set[str]:
    return {check.name for check in audit.checks if not check.passed}


def test_it_names_a_duplicate_effect_and_a_commit_without_a_key(tmp_path: Path, case_repo: Path) -> None:
    clean = replay_check_run(source=case_repo, workdir=tmp_path / "check", kills=0, seed=1, baseline=False,
                             env=child_env(), child_timeout=300)
    assert clean.passed, clean.table()
    target = Path(Run.objects.get(run_id=clean.run_id).spec["target"])
    replay = replay_range(case_repo)

    last_message = git(target, "log", "-1", "--format=%B")
    git(target, "commit", "-q", "--allow-empty", "-m", last_message, extra_env=_WHO)
    duplicated = replay_audit(run_id=clean.run_id, source=case_repo, replay=replay, target=target)

    assert duplicated.duplicates == 1 and not duplicated.passed
    assert {"one commit per idempotency key", "one target commit per source commit"} <= _failed(duplicated)

    git(target, "commit", "-q", "--allow-empty", "-m", "sneaked in\n", extra_env=_WHO)
    unkeyed = replay_audit(run_id=clean.run_id, source=case_repo, replay=replay, target=target)

    assert unkeyed.unkeyed == 1
    assert "every target commit carries exactly one idempotency key" in _failed(unkeyed)
