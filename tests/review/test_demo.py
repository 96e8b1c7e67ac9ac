"""``manage.py demo`` seeds runs in every state by replaying real git history and by driving the
chat-tools planner against the demo's fake model, creates one login per role, and does it once: a
second start reuses what is there, ``--reset`` deletes what it seeded and seeds again. The demo
prints the URL and the demo logins; next to the replays it has model-driven runs, a run that stays
running and two conflicts, so every page has something true to show (DESIGN.md section 6.7)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from review.queries.conflict_evidence import conflict_evidence
from review.roles import demo_users_ensure, roles_sync
from runtime.demo.agents import RUNNING_STEPS, model_script
from runtime.demo.reset import demo_reset
from runtime.demo.scenarios import MIN_COMMITS
from runtime.demo.seeding import DEMO_ORDER, demo_seed
from runtime.demo.services import DemoServices
from runtime.engine import run_advance, run_start
from runtime.errors import DemoSetupError
from runtime.models import Checkpoint, ReviewCase, Run, TraceEvent
from runtime.observability.stats import recovery_stats
from tests.engine.support import restore
from tests.factories import write_scripted_task
from tests.helpers.procs import child_env, run_manage
from tests.planners.gitrepo import git

pytestmark = pytest.mark.django_db(transaction=True)

EXPECTED = {
    "completed": ("completed", "verified"),
    "running": ("running", ""),
    "awaiting_approval": ("awaiting_approval", "approval_required"),
    "approval_expired": ("awaiting_approval", "approval_expired"),
    "receipt_conflict": ("needs_review", "receipt_conflict"),
    "receipt_conflict_2": ("needs_review", "receipt_conflict"),
    "failed": ("failed", "policy_violation"),
    "recovered": ("completed", "verified"),
    "agent_orders": ("awaiting_approval", "approval_required"),
    "agent_ledger": ("completed", "verified"),
}
MODEL_DRIVEN = {"running", "agent_orders", "agent_ledger"}


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


@pytest.fixture
def services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DemoServices]:
    """The demo's fake model and orders service, as ``manage.py demo`` starts them."""
    started = DemoServices(workdir=tmp_path / "demo")
    started.start(script=model_script())
    for name, value in started.environ().items():
        monkeypatch.setenv(name, value)
    yield started
    started.stop()


@pytest.fixture
def children_share_the_test_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's crashing child (``manage.py run``) inherits this process's environment: point
    it at the test database, as ``manage.py demo`` points it at its own."""
    env = child_env()
    for name in ("DATABASE_URL", "RATCHET_HWM_DATABASE_URL", "RATCHET_VAR_DIR", "PYTHONPATH",
                 "DJANGO_SETTINGS_MODULE"):
        if name in env:
            monkeypatch.setenv(name, env[name])


def test_it_seeds_a_run_in_every_state(source, tmp_path, ratchet_keys, enqueued, services,
                                       children_share_the_test_database) -> None:
    seed = demo_seed(source=source, workdir=tmp_path / "demo", services=services)

    assert seed.created and list(seed.runs) == list(DEMO_ORDER)
    for name, run_id in seed.runs.items():
        run = Run.objects.get(run_id=run_id)
        assert (run.phase, run.stop_reason) == EXPECTED[name], name
        kind = "chat-tools" if name in MODEL_DRIVEN else "git-history"
        assert run.spec["task"]["planner"]["kind"] == kind, name
    assert seed.runs["running"] in enqueued, "the slow model-driven run is handed to the worker"
    for conflict in ("receipt_conflict", "receipt_conflict_2"):
        assert ReviewCase.objects.get(run_id=seed.runs[conflict]).status == "open"
    content = ReviewCase.objects.get(run_id=seed.runs["receipt_conflict"])
    assert [f.path for f in conflict_evidence(case=content).files if not f.same], \
        "the first conflict's other caller wrote other file content"
    assert recovery_stats(run_ids=[seed.runs["recovered"]]).succeeded == 1, "a real crash, recovered"
    spec = (tmp_path / "demo" / "tasks" / "awaiting_approval.toml").read_text()
    assert 'approval_risks = ["low"]' in spec and 'kind = "git-history"' in spec
    _model_proposed_order_waits_for_its_approval(seed.runs, tmp_path, services)


def _model_proposed_order_waits_for_its_approval(runs: dict[str, str], tmp_path: Path,
                                                 services: DemoServices) -> None:
    seed_runs = runs
    pending = restore(seed_runs["agent_orders"]).state.pending
    assert (pending.action.kind, pending.action.risk.value, pending.requires_approval) == ("http_request", "high",
                                                                                          True)
    assert pending.action.params["body"]["customer"]["email"] == {"$secret": "customer_email"}
    with sqlite3.connect(tmp_path / "demo" / "orders.sqlite3") as conn:
        assert conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 0, "nothing sent before the approval"
    with sqlite3.connect(tmp_path / "demo" / "ledger.sqlite3") as conn:
        assert conn.execute("SELECT order_ref FROM ledger ORDER BY order_ref").fetchall() == [("ord-1",), ("ord-2",)]
    steps = services.model.stats()["requests"] if services.model else {}
    assert sorted(len(conv) for conv in steps.values()) == [1, 3], "asked once per step: orders 1, ledger 3"


def test_the_running_run_keeps_the_model_thinking_for_minutes() -> None:
    script = model_script()
    running = next(entry for entry in script["by_task"] if entry["match"] == "[demo:slow-notes]")
    delays = [step[0].get("delay", 0) for step in running["steps"]]
    assert len(delays) == RUNNING_STEPS + 1 and sum(delays) >= 180, "at least three minutes of proposals"


def test_it_does_not_seed_twice(source, tmp_path, ratchet_keys, enqueued, services,
                                children_share_the_test_database) -> None:
    first = demo_seed(source=source, workdir=tmp_path / "demo", services=services)
    runs = Run.objects.count()
    again = demo_seed(source=source, workdir=tmp_path / "demo", services=services)
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
        demo_seed(source=repo, workdir=tmp_path / "demo", services=DemoServices(workdir=tmp_path / "demo"))


def test_it_resets_only_what_the_demo_seeded(tmp_path, ratchet_keys) -> None:
    workdir = tmp_path / "demo"
    task = write_scripted_task(workdir / "tasks", steps=[{"target": "a.txt", "content": "a\n"}])
    seeded = {"completed": run_start(spec_path=task), "awaiting": run_start(spec_path=task)}
    run_advance(run_id=seeded["completed"])
    (workdir / "seeded.json").write_text(json.dumps(seeded))
    other = write_scripted_task(tmp_path / "mine", steps=[{"target": "b.txt", "content": "b\n"}])
    kept = run_start(spec_path=other)

    reset = demo_reset(workdir=workdir)

    assert sorted(reset.runs) == sorted(seeded.values()) and reset.directory and not workdir.exists()
    assert list(Run.objects.values_list("run_id", flat=True)) == [kept]
    assert set(Checkpoint.objects.values_list("run_id", flat=True)) == {kept}
    assert set(TraceEvent.objects.values_list("run_id", flat=True)) == {kept}
    assert (tmp_path / "mine" / "task.toml").exists()
    assert demo_reset(workdir=workdir).runs == [], "a second reset finds nothing"


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
    for name in DEMO_ORDER:
        assert f"  {name:<18} " in result.stdout
    for role in ("operator", "reviewer", "admin"):
        assert f"  {role:<9} s3cret-demo" in result.stdout
    phases = sorted(phase for phase, _ in EXPECTED.values())
    # the running run is left to a worker, and --seed-only starts none
    assert sorted(Run.objects.values_list("phase", flat=True)) == phases

    again = run_manage("demo", "--seed-only", "--source", str(source), env=env, timeout=180)
    assert again.returncode == 0, again.stderr
    assert "Already seeded; reusing runs:" in again.stdout
    assert Run.objects.count() == len(DEMO_ORDER)


@pytest.mark.slow
def test_the_command_resets_and_seeds_again(source, tmp_path, ratchet_keys) -> None:
    env = child_env(RATCHET_VAR_DIR=str(tmp_path / "var"), RATCHET_DEMO_PASSWORD="s3cret-demo")
    first = run_manage("demo", "--seed-only", "--source", str(source), env=env, timeout=180)
    assert first.returncode == 0, first.stderr
    first_ids = set(Run.objects.values_list("run_id", flat=True))
    phases = sorted(phase for phase, _ in EXPECTED.values())

    reset = run_manage("demo", "--seed-only", "--reset", "--source", str(source), env=env, timeout=180)
    assert reset.returncode == 0, reset.stderr
    assert f"Reset: deleted {len(DEMO_ORDER)} seeded runs" in reset.stdout and "Seeded runs:" in reset.stdout
    assert Run.objects.count() == len(DEMO_ORDER) and not first_ids & set(Run.objects.values_list("run_id", flat=True))
    assert sorted(Run.objects.values_list("phase", flat=True)) == phases
