"""Story: SIGKILL at every crash point, resume in a new process, and every effect is still unique.

DESIGN.md sections 5 and 8: "kill the process before and after every persistence step; the
result after recovery is still unique". For each registered crash point of the engine, the
checkpoint commit protocol and the git adapter -- at its first and third hit where a run hits it
three times or more -- a child ``manage.py run`` of a five-commit git-history replay SIGKILLs
itself there (``RATCHET_CRASH_AT=<point>:<nth>``, lease 3 s). A new child ``manage.py resume``
takes the expired lease over and finishes the run. Then, from the environment's own records:

* the replayed HEAD tree equals the source tip tree (the uninterrupted run's result);
* every ``Idempotency-Key`` trailer is on exactly one commit, there is one keyed commit per
  replayed commit, the keys are the deterministic ``derive_key(run, cursor, 0)`` sequence and
  the ``Intent-Digest`` trailers are the plan's, in order -- the same as an uninterrupted run;
* ``manage.py recovery_stats --json --run RUN`` reports success rate 1.0, no failure and no
  duplicate submission, and ``manage.py trace RUN`` verifies the hash chain (both commands run
  in the test process: the children above already exercise the CLI).

The first hit of a ``checkpoint.*`` point is the run's creation commit; a kill there leaves no
run to resume, which has its own story below. The workspace adapter's points are covered by the
second matrix at the end, on a scripted five-write workspace task.

Parametrised, so the same cases run on SQLite and on PostgreSQL (``tests/run`` runs the suite
once per database; the children use the test database through ``child_env``). The third-hit
cases are marked ``slow``; ``pytest -m slow tests/engine`` runs only those.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command

import runtime.adapters.git.adapter
import runtime.adapters.workspace.adapter
import runtime.checkpoints.protocol
import runtime.checkpoints.transaction
import runtime.engine.complete
import runtime.engine.execute
import runtime.engine.propose
import runtime.engine.settle
from runtime.checkpoints.protocol import checkpoint_hwm
from runtime.core.crashpoints import CRASH_POINTS
from runtime.core.idempotency import derive_key
from runtime.engine import run_advance, run_start
from runtime.models import Run
from tests.engine.support import (
    SOURCE_COMMITS,
    WORKSPACE_FINAL,
    WORKSPACE_STEPS,
    commit_trailer,
    crash_point_hits,
    head_tree,
    journal_effects,
    key_effects,
    keyed_commits,
    planned_intents,
    run_target,
    workspace_files,
    workspace_journal,
)
from tests.helpers.procs import KILLED, ChildResult, child_env, run_manage
from tests.planners.gitrepo import git

GIT_RUN_HITS = {
    # the first proposal, one inside each receipt's step (one commit per write, DESIGN.md section
    # 4.13: the receipt of write N commits with the intent of write N+1), and the last one asked
    # again by the step after the receipt that answered "done"
    "engine.before_propose": SOURCE_COMMITS + 2,
    "engine.after_intent_commit": SOURCE_COMMITS,
    "engine.before_execute": SOURCE_COMMITS,
    "engine.after_execute": SOURCE_COMMITS,
    "engine.after_receipt_cache": SOURCE_COMMITS,
    "engine.after_step_commit": SOURCE_COMMITS,
    "engine.before_verify": 1,
    "git.before_write": SOURCE_COMMITS,
    "git.after_objects": SOURCE_COMMITS,
    "git.before_ref_update": SOURCE_COMMITS,
    "git.after_ref_update": SOURCE_COMMITS,
    "git.after_write": SOURCE_COMMITS,
    # create + the first intent + one folded commit (receipt N, intent N+1) per write but the
    # last + the last receipt + completion
    "checkpoint.after_append": SOURCE_COMMITS + 3,
    "checkpoint.before_hwm_cas": SOURCE_COMMITS + 3,
    "checkpoint.after_hwm_cas": SOURCE_COMMITS + 3,
    # The receipts ledger (DESIGN.md section 3.1): between its rows and the checkpoint row, and
    # right after the one transaction committed.
    "checkpoint.after_ledger_rows": SOURCE_COMMITS + 3,
    "checkpoint.after_commit": SOURCE_COMMITS + 3,
}
"""How often an uninterrupted run of the replay task hits each point (checked below)."""

WORKSPACE_RUN_HITS = {
    "workspace.before_write": len(WORKSPACE_STEPS),
    "workspace.after_prepare": len(WORKSPACE_STEPS),
    "workspace.before_rename": len(WORKSPACE_STEPS),
    "workspace.after_rename": len(WORKSPACE_STEPS),
    "workspace.after_write": len(WORKSPACE_STEPS),
}

CREATION_HIT = 1
"""The first hit of every ``checkpoint.*`` point is inside ``run_start`` (generation 1)."""


def _cases(hits: dict[str, int], prefixes: tuple[str, ...]) -> list:
    """``(point, nth)`` for every registered point with one of ``prefixes``: its first hit (the
    first after run creation for ``checkpoint.*``) and, where a run hits it 3+ times, its third."""
    cases = []
    for point in sorted(p for p in CRASH_POINTS if p.split(".")[0] in prefixes):
        count = hits.get(point, 0)
        if count == 0:
            cases.append(pytest.param(point, 1, id=point, marks=pytest.mark.skip(
                reason="an uninterrupted run never hits this point")))
            continue
        first = CREATION_HIT + 1 if point.startswith("checkpoint.") else 1
        cases.append(pytest.param(point, first, id=f"{point}:{first}"))
        if count >= 3:
            cases.append(pytest.param(point, 3, id=f"{point}:3", marks=pytest.mark.slow))
    return cases


def _run_id(killed: ChildResult) -> str:
    first = killed.stdout.splitlines()[0] if killed.stdout else ""
    assert first.startswith("run "), (killed.returncode, killed.stdout, killed.stderr)
    return first.removeprefix("run ")


KILLED_LEASE_SECONDS = "3"
"""The killed child's lease: short, so a resume takes the dead holder's lease over within its
``--wait``, and long enough that a step on a loaded machine does not outlive it before the kill."""


def _killed(task: Path, point: str, nth: int) -> str:
    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=f"{point}:{nth}", RATCHET_LEASE_SECONDS=KILLED_LEASE_SECONDS))
    assert killed.returncode == KILLED, (killed.returncode, killed.stdout, killed.stderr)
    return _run_id(killed)


def _resume_until_done(run_id: str) -> int:
    """Resume in new processes (at most three) until the run completes; returns how many ran."""
    for attempt in range(1, 4):
        resumed = run_manage("resume", run_id, "--wait", "10", "--no-progress")
        if resumed.returncode == 0 and "verdict: completed" in resumed.stdout:
            return attempt
    raise AssertionError(f"run {run_id} did not complete after 3 resumes:\n"
                         f"{resumed.stdout}\n{resumed.stderr}")


def _manage(*args: str) -> str:
    """Run a management command in this process (the children already proved the CLI starts;
    this keeps the matrix fast) and return its stdout; a CommandError fails the test."""
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def _assert_recovered_cleanly(run_id: str, resumes: int) -> None:
    numbers = json.loads(_manage("recovery_stats", "--json", "--run", run_id))
    assert numbers["recoveries"] == resumes
    assert (numbers["success_rate"], numbers["failed"]) == (1.0, 0)
    assert numbers["duplicate_submissions"] == 0 and numbers["audited_runs"] == 1
    assert "trace hash chain verifies" in _manage("trace", run_id)


def _assert_replayed_exactly_once(run_id: str, source: Path) -> None:
    assert Run.objects.get(run_id=run_id).phase == "completed"
    target = run_target(run_id)
    assert head_tree(target) == git(source, "rev-parse", "HEAD^{tree}").strip()
    assert git(target, "status", "--porcelain", "--untracked-files=all") == ""
    effects = key_effects(target)
    assert set(effects.values()) == {1}, effects
    keys = keyed_commits(target)
    assert keys == [derive_key(run_id=run_id, cursor=c, replan_epoch=0)
                    for c in range(SOURCE_COMMITS)]
    assert commit_trailer(target, "Intent-Digest") == planned_intents(source)


# --- the git matrix ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("point", "nth"), _cases(GIT_RUN_HITS, ("engine", "checkpoint", "git")))
def test_it_replays_each_commit_exactly_once_after_a_kill(
    replay_task: Path, source: Path, point: str, nth: int
) -> None:
    run_id = _killed(replay_task, point, nth)

    resumes = _resume_until_done(run_id)

    _assert_replayed_exactly_once(run_id, source)
    _assert_recovered_cleanly(run_id, resumes)


@pytest.mark.django_db(transaction=True)
def test_it_matches_an_uninterrupted_run(replay_task: Path, source: Path) -> None:
    done = run_manage("run", str(replay_task), "--no-progress")
    assert done.returncode == 0, done.stderr
    run_id = _run_id(done)

    _assert_replayed_exactly_once(run_id, source)
    stats = json.loads(_manage("recovery_stats", "--json", "--run", run_id))
    assert (stats["recoveries"], stats["duplicate_submissions"]) == (0, 0)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("point", sorted(p for p in GIT_RUN_HITS if p.startswith("checkpoint.")
                                         # past the commit point, the main transaction, with the mark in
                                         # its own store (DESIGN.md sections 4.2 and 4.3); a run killed there
                                         # resumes (tests/cli/test_half_created_runs.py)
                                         and p not in ("checkpoint.after_commit", "checkpoint.before_hwm_cas",
                                                       "checkpoint.after_hwm_cas")))
def test_it_fails_closed_when_killed_while_creating_the_run(
    replay_task: Path, source: Path, point: str
) -> None:
    killed = run_manage("run", str(replay_task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=f"{point}:{CREATION_HIT}",
                                      RATCHET_LEASE_SECONDS="1"))
    assert killed.returncode == KILLED and killed.stdout == ""  # no run id was ever announced
    (run,) = Run.objects.all()
    assert checkpoint_hwm(run_id=run.run_id).generation == 0
    assert keyed_commits(run_target(run.run_id)) == []

    resumed = run_manage("resume", run.run_id, "--wait", "10", "--no-progress")
    assert resumed.returncode != 0 and "no committed checkpoint" in resumed.stderr
    assert keyed_commits(run_target(run.run_id)) == []

    again = run_manage("run", str(replay_task), "--no-progress")
    assert again.returncode == 0, again.stderr
    _assert_replayed_exactly_once(_run_id(again), source)


def _count_hits(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    return crash_point_hits(monkeypatch, (
        runtime.engine.propose, runtime.engine.execute, runtime.engine.settle, runtime.engine.complete,
        runtime.checkpoints.protocol, runtime.checkpoints.transaction, runtime.adapters.git.adapter,
        runtime.adapters.workspace.adapter))


@pytest.mark.django_db(transaction=True)
def test_it_covers_every_crash_point_a_run_hits(
    replay_task: Path, workspace_task: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hits = _count_hits(monkeypatch)
    for task in (replay_task, workspace_task):
        assert run_advance(run_id=run_start(spec_path=task)).phase == "completed"

    # Every point a run hits is in a matrix, with the hit count it really has.
    assert set(hits) == set(GIT_RUN_HITS) | set(WORKSPACE_RUN_HITS)
    assert set(hits) <= set(CRASH_POINTS)
    workspace_hits = {p: n for p, n in hits.items() if p.startswith("workspace.")}
    assert workspace_hits == WORKSPACE_RUN_HITS
    git_run = Counter({p: n for p, n in hits.items() if not p.startswith("workspace.")})
    # The workspace run hit the engine and checkpoint points too: subtract its share.
    workspace_share = {"engine.before_propose": len(WORKSPACE_STEPS) + 2,
                       "engine.before_verify": 1,
                       **{p: len(WORKSPACE_STEPS) for p in GIT_RUN_HITS
                          if p.startswith("engine.") and p not in ("engine.before_propose",
                                                                   "engine.before_verify")},
                       **{p: len(WORKSPACE_STEPS) + 3 for p in GIT_RUN_HITS
                          if p.startswith("checkpoint.")}}
    git_run.subtract(workspace_share)
    assert dict(git_run) == GIT_RUN_HITS


# --- the workspace matrix -----------------------------------------------------------------------


def _assert_workspace_written_exactly_once(run_id: str) -> None:
    assert Run.objects.get(run_id=run_id).phase == "completed"
    workspace = run_target(run_id)
    assert workspace_files(workspace) == {
        "README.md": (WORKSPACE_FINAL["README.md"], False),
        "scripts/run.sh": (WORKSPACE_FINAL["scripts/run.sh"], True),
    }
    keys = [derive_key(run_id=run_id, cursor=c, replan_epoch=0)
            for c in range(len(WORKSPACE_STEPS))]
    assert journal_effects(workspace) == dict.fromkeys(keys, 1)
    committed = [r["key"] for r in workspace_journal(workspace) if r["type"] == "committed"]
    assert committed == keys
    outcomes = Counter(r["key"] for r in workspace_journal(workspace) if r["type"] != "prepared")
    prepared = Counter(r["key"] for r in workspace_journal(workspace) if r["type"] == "prepared")
    assert outcomes == prepared  # no write left in flight
    assert not [p for p in workspace.rglob(".ratchet-tmp-*")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("point", "nth"), _cases(WORKSPACE_RUN_HITS, ("workspace",)))
def test_it_writes_each_workspace_file_exactly_once_after_a_kill(
    workspace_task: Path, point: str, nth: int
) -> None:
    run_id = _killed(workspace_task, point, nth)

    resumes = _resume_until_done(run_id)

    _assert_workspace_written_exactly_once(run_id)
    _assert_recovered_cleanly(run_id, resumes)
