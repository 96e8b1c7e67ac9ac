"""``manage.py demo`` seeds runs in every state by replaying real git history, creates one login
per role, and does it once: a second start reuses what is there (issue: "Demo ... seeds runs in
every state by replaying real repository history ... and prints the URL and demo logins")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from review.roles import demo_users_ensure, roles_sync
from runtime.demo.scenarios import MIN_COMMITS, SCENARIOS
from runtime.demo.seeding import demo_seed
from runtime.errors import DemoSetupError
from runtime.models import ReviewCase, Run
from tests.helpers.procs import child_env, run_manage
from tests.planners.gitrepo import git

pytestmark = pytest.mark.django_db(transaction=True)

EXPECTED = {
    "completed": ("completed", "verified"),
    "running": ("running", ""),
    "awaiting_approval": ("awaiting_approval", "approval_required"),
    "approval_expired": ("awaiting_approval", "approval_expired"),
    "receipt_conflict": ("needs_review", "receipt_conflict"),
    "failed": ("failed", "policy_violation"),
}


AUTHOR = {"GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.org"}


def _commit(repo: Path, message: str, day: int) -> None:
    git(repo, "add", "-A")
    git(
        repo,
        "commit",
        "-q",
        "-m",
        message,
        GIT_AUTHOR_DATE=f"2024-02-{day:02d}T09:00:00+00:00",
        **AUTHOR,
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real repository of nine commits: adds, edits, an executable script, a delete."""
    repo = tmp_path_factory.mktemp("demo-source") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# Demo source\n")
    _commit(repo, "Initial import", 1)
    for day in range(2, 10):
        (repo / f"notes/day-{day}.md").parent.mkdir(exist_ok=True)
        (repo / f"notes/day-{day}.md").write_text(f"Notes of day {day}\n")
        (repo / "README.md").write_text(f"# Demo source\n\nUpdated on day {day}.\n")
        if day == 5:
            (repo / "run.sh").write_text("#!/bin/sh\necho run\n")
            (repo / "run.sh").chmod(0o755)
        if day == 7:
            (repo / "notes/day-3.md").unlink()
        _commit(repo, f"Day {day}: notes and README", day)
    return repo


def test_it_seeds_a_run_in_every_state_from_real_history(
    source, tmp_path, ratchet_keys, enqueued
) -> None:
    seed = demo_seed(source=source, workdir=tmp_path / "demo")

    assert seed.created and set(seed.runs) == {s.name for s in SCENARIOS}
    for name, run_id in seed.runs.items():
        run = Run.objects.get(run_id=run_id)
        assert (run.phase, run.stop_reason) == EXPECTED[name], name
        assert run.spec["task"]["planner"]["kind"] == "git-history"
    assert seed.runs["running"] in enqueued, "the long replay is handed to the worker"
    assert ReviewCase.objects.get(run_id=seed.runs["receipt_conflict"]).status == "open"
    spec = (tmp_path / "demo" / "tasks" / "awaiting_approval.toml").read_text()
    assert 'approval_risks = ["low"]' in spec and 'kind = "git-history"' in spec


def test_it_does_not_seed_twice(source, tmp_path, ratchet_keys, enqueued) -> None:
    first = demo_seed(source=source, workdir=tmp_path / "demo")
    runs = Run.objects.count()
    again = demo_seed(source=source, workdir=tmp_path / "demo")
    assert not again.created and again.runs == first.runs
    assert Run.objects.count() == runs
    assert json.loads((tmp_path / "demo" / "seeded.json").read_text()) == first.runs


def test_it_explains_a_history_too_short_to_replay(tmp_path, ratchet_keys) -> None:
    repo = tmp_path / "short"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    _commit(repo, "only commit", 1)
    with pytest.raises(DemoSetupError, match=f"replays up to {MIN_COMMITS - 1} commits back"):
        demo_seed(source=repo, workdir=tmp_path / "demo")


def test_it_creates_one_login_per_role_and_keeps_existing_ones(db) -> None:
    roles_sync()
    first = demo_users_ensure()
    assert [(login.username, login.role) for login in first] == [
        ("operator", "operator"),
        ("reviewer", "reviewer"),
        ("admin", "admin"),
    ]
    users = get_user_model().objects
    for login in first:
        user = users.get(username=login.username)
        assert user.check_password(login.password)
        assert list(user.groups.values_list("name", flat=True)) == [login.role]
    assert users.get(username="admin").is_staff and not users.get(username="operator").is_staff
    again = demo_users_ensure()
    assert [login.password for login in again] == [None, None, None], "left as they were"
    assert users.get(username="reviewer").check_password(first[1].password)
    chosen = demo_users_ensure(password="demo-pass")
    assert {login.password for login in chosen} == {"demo-pass"}
    assert users.get(username="operator").check_password("demo-pass")


def test_the_command_seeds_and_prints_the_logins(source, tmp_path, ratchet_keys) -> None:
    env = child_env(RATCHET_VAR_DIR=str(tmp_path / "var"), RATCHET_DEMO_PASSWORD="s3cret-demo")

    result = run_manage("demo", "--seed-only", "--source", str(source), env=env, timeout=180)

    assert result.returncode == 0, result.stderr
    assert "Seeded runs:" in result.stdout
    for scenario in SCENARIOS:
        assert f"  {scenario.name:<18} " in result.stdout
    for role in ("operator", "reviewer", "admin"):
        assert f"  {role:<9} s3cret-demo" in result.stdout
    assert sorted(Run.objects.values_list("phase", flat=True)) == sorted(
        phase for phase, _ in EXPECTED.values()
    )

    again = run_manage("demo", "--seed-only", "--source", str(source), env=env, timeout=180)
    assert again.returncode == 0, again.stderr
    assert "Already seeded; reusing runs:" in again.stdout
    assert Run.objects.count() == len(SCENARIOS)
