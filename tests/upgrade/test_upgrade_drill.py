"""Story: upgrading from the previous release with runs in flight, as runtime/docs/guides/upgrade.md says.

The previous release (``tests/upgrade/previous_release.toml``, from this repository's history) is
installed into its own venv and migrates a fresh PostgreSQL database pair. It leaves three runs
in flight: one waiting for approval, one frozen for review (its workspace changed behind it),
one SIGKILLed mid-step (its second write executed, nothing recorded). Then the procedure: the
current code migrates the same databases, registers its combination as a canary taking every
new run, and starts its workers on that combination's queue; the previous release's worker
(with the sweeper) stays on the default queue.

What it shows: a current worker handed an old run refuses it (traced ``combination.refused``,
nothing executed); the old worker recovers the killed run and runs the approved one (approved
from the current code) on the migrated schema; a new run is pinned to the new combination and
runs on the current worker; the frozen run stays frozen and its checkpoint verifies under the
current code; every write happened exactly once; both workers stop on SIGTERM with exit 0.
PostgreSQL pass (the drill's own databases on the test server, Redis as the broker).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from celery import Celery

from tests.celery.support import flush_redis, redis_problem
from tests.deploy.layout import stop
from tests.factories import write_scripted_task
from tests.gateway.support import effects_by_key
from tests.helpers.keys import TestKey
from tests.helpers.procs import KILLED, finish
from tests.review.stories import APPROVAL_STEPS
from tests.upgrade.drill import DRILL_REDIS_URL, Code, Drill, drill_databases
from tests.upgrade.release import previous_release, release_install

pytestmark = pytest.mark.postgres

THREE = [{"target": f"notes/{i}.txt", "content": f"note {i}\n"} for i in range(1, 4)]


def _run_id(stdout: str) -> str:
    match = re.search(r"^run ([0-9a-f]{32})$", stdout, re.M)
    assert match, stdout
    return match.group(1)


def _migrate(drill: Drill, code: Code) -> None:
    """``migrate``: the main database, then the mark store (``runtime/management/commands/migrate.py``)."""
    drill.manage_ok(code, "migrate", "-v0")


def _nodes(drill: Drill, run_id: str) -> list[str]:
    """The worker nodes that took the run's lease since the upgrade, in order (de-duplicated runs)."""
    nodes = [e["worker"].split("@")[0] for e in drill.events(run_id, "lease.acquired") if "@drill" in e["worker"]]
    return [n for i, n in enumerate(nodes) if i == 0 or nodes[i - 1] != n]


@pytest.fixture
def drill(tmp_path: Path, ratchet_keys: dict[str, TestKey]) -> Drill:
    problem = redis_problem(DRILL_REDIS_URL)
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {problem}")
        pytest.skip(f"{problem} (set RATCHET_TEST_DRILL_REDIS_URL or start Redis)")
    flush_redis(DRILL_REDIS_URL)
    with drill_databases() as (main_url, marks_url):
        world = Drill(main_url=main_url, marks_url=marks_url, directory=tmp_path)
        try:
            yield world
        finally:
            for worker in world.workers:
                worker.stop()


def test_runs_in_flight_survive_the_upgrade_each_on_its_own_code(tmp_path: Path, drill: Drill) -> None:
    began = time.monotonic()
    commit, version = previous_release()
    old, new = Code.of(release_install(commit, version)), Code.current()
    installed = time.monotonic()

    # --- The previous release, in production: runs in flight. -----------------------------------
    _migrate(drill, old)
    waiting_spec = write_scripted_task(tmp_path / "waiting", steps=APPROVAL_STEPS, approval_risks=("high",))
    frozen_spec = write_scripted_task(tmp_path / "frozen", steps=THREE)
    killed_spec = write_scripted_task(tmp_path / "killed", steps=THREE)
    fresh_spec = write_scripted_task(tmp_path / "fresh", steps=THREE)  # the same task, a workspace of its own
    # Three processes of the previous release at once (each pays Django's start-up).
    children = [drill.spawn(old, "run", str(waiting_spec), "--no-progress"),
                drill.spawn(old, "run", str(frozen_spec), "--max-steps", "3", "--no-progress"),
                drill.spawn(old, "run", str(killed_spec), "--no-progress",
                            RATCHET_CRASH_AT="engine.after_execute:2", RATCHET_LEASE_SECONDS="1")]
    waiting_run, frozen_run, killed_run = (finish(child, timeout=180) for child in children)
    waiting, frozen = _run_id(waiting_run.stdout), _run_id(frozen_run.stdout)
    (tmp_path / "frozen" / "ws" / "intruder.txt").write_text("changed behind the run's back\n")
    drill.manage(old, "resume", frozen, "--no-progress")
    assert killed_run.returncode == KILLED, killed_run.stderr[-2000:]
    killed = _run_id(killed_run.stdout)
    assert drill.phase(waiting)[0] == "awaiting_approval"
    assert drill.phase(frozen)[0] == "needs_review"
    assert drill.phase(killed)[0] in ("running", "pending")
    frozen_generation = drill.phase(frozen)[1]
    old_combination = {drill.combination(r) for r in (waiting, frozen, killed)}
    assert len(old_combination) == 1
    [old_combination_id] = old_combination
    old_ran = time.monotonic()

    # --- The upgrade: migrate, register the new combination, start its workers. -----------------
    _migrate(drill, new)
    registered = drill.manage_ok(new, "combinations", "register", str(fresh_spec), "--share", "1",
                                  "--by", "ops", "--reason", f"upgrade from {version}")
    new_combination_id = registered.split()[0]
    assert new_combination_id.startswith("sha256:") and new_combination_id != old_combination_id, (
        "the current code's combination must differ from the previous release's: bump the version in "
        "pyproject.toml when the code changes (runtime/docs/guides/upgrade.md)")
    current = drill.worker(new, "--no-beat", "--combinations", new_combination_id, name="current", wait=False)

    # The current code does not approve an old run: approving restores it, under changed code.
    [item] = [json.loads(line) for line in drill.manage_ok(new, "approvals", "list").splitlines()
              if line.startswith("{") and json.loads(line)["run_id"] == waiting]
    before = drill.phase(waiting)
    approve = ("approvals", "approve", waiting, "--approver", "olivia",
               "--fingerprint", item["environment_fingerprint"])
    refused_approval = drill.manage(new, *approve)
    assert refused_approval.returncode != 0 and "was created with" in refused_approval.stderr, \
        refused_approval.stderr[-2000:]
    assert drill.phase(waiting) == before and not drill.events(waiting, "approval.granted")

    # A current worker handed an old run refuses it: nothing runs under changed code.
    current.wait_ready(timeout=120)
    producer = Celery("drill-producer", broker=DRILL_REDIS_URL, set_as_current=False)
    producer.send_task("ratchet.advance_run", args=[killed], queue="ratchet.c." + new_combination_id[7:19])
    producer.close()
    [refused] = drill.wait_event(killed, "combination.refused")
    assert refused["worker"].startswith("current@") and refused["error"] == "PluginVersionMismatchError", refused

    # The previous release's worker (with the sweeper) keeps the default queue.
    previous = drill.worker(old, name="previous", wait=False)

    # The previous release's dashboard (or command) approves its run; the current code starts a new one.
    approving = drill.spawn(old, *approve)
    started = drill.manage_ok(new, "shell", "-c", (
        "from runtime.engine import run_start; from runtime.workers.dispatch import run_enqueue; "
        f"run_id = run_start(spec_path={str(fresh_spec)!r}); run_enqueue(run_id=run_id); print('run', run_id)"))
    approved = finish(approving, timeout=180)
    assert approved.returncode == 0 and "run " + waiting in approved.stdout, approved.stderr[-2000:]
    previous.wait_ready(timeout=120)
    fresh = _run_id(started)

    for run_id in (killed, waiting, fresh):
        assert drill.wait_phase(run_id, ("completed", "failed", "needs_review")) == "completed", run_id
    upgraded = time.monotonic()

    # Each run ran on the code it was pinned to; nothing was lost, duplicated or resumed silently.
    assert drill.combination(fresh) == new_combination_id
    assert {drill.combination(r) for r in (waiting, frozen, killed)} == {old_combination_id}
    # The one lease a current worker took of an old run is the one it refused under.
    assert _nodes(drill, killed) == ["current"] * len(drill.events(killed, "combination.refused")) + ["previous"]
    assert set(_nodes(drill, waiting)) == {"previous"} and set(_nodes(drill, fresh)) == {"current"}
    assert drill.phase(frozen) == ("needs_review", frozen_generation)
    drill.manage_ok(new, "checkpoint", "verify", frozen)
    for directory, writes in (("waiting", 2), ("killed", 3), ("frozen", 1), ("fresh", 3)):
        effects = effects_by_key(tmp_path / directory / "ws")
        assert len(effects) == writes and set(effects.values()) == {1}, (directory, effects)
    assert [drill.phase(r)[0] for r in (waiting, frozen, killed, fresh)] == \
        ["completed", "needs_review", "completed", "completed"]

    codes = {w.name: stop(w) for w in (current, previous)}
    assert codes == {"current": 0, "previous": 0}, codes
    print(f"\nupgrade drill: install {installed - began:.1f} s, previous release's runs {old_ran - installed:.1f} s, "
          f"upgrade and runs {upgraded - old_ran:.1f} s, total {time.monotonic() - began:.1f} s")
