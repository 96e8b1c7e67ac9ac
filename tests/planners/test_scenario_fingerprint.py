"""Story: a run's scenario fingerprint changes when anything externally fixed changes.

The fingerprint covers the spec's schema, task, policy (permissions, allowlists, approval risks,
budgets), environment, planner and verifier expectation, plus the observed initial state
(DESIGN.md section 3). A resume under a changed scenario is refused because the fingerprints
differ; edits that change nothing (comments, key order, a round trip through the stored JSON)
must keep it stable.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from runtime.core.canonical import DigestKind, digest
from runtime.taskspec import TaskSpec, load_task_spec, scenario_fingerprint
from tests.planners.gitrepo import FIXTURES, write_task

SCRIPTED = (FIXTURES / "scripted.toml").read_text(encoding="utf-8")
REPLAY = (FIXTURES / "git_replay.toml").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Initial:
    instance_id: str = "env-1"
    version: str = "w0"
    state_fingerprint: str = digest(DigestKind.ENVIRONMENT, {"files": []})


def _fingerprint(directory: Path, text: str, initial: Initial = Initial()) -> str:
    return scenario_fingerprint(load_task_spec(write_task(directory, text)), initial)


SPEC_CHANGES = [
    ("task id", SCRIPTED, 'id = "scripted-demo"', 'id = "scripted-demo-2"'),
    ("task version", SCRIPTED, 'version = "1"', 'version = "2"'),
    ("tenant", SCRIPTED, 'version = "1"', 'version = "1"\ntenant = "acme"'),
    ("policy id", SCRIPTED, 'id = "demo"', 'id = "demo-strict"'),
    ("policy version", SCRIPTED, 'id = "demo"\nversion = "1"', 'id = "demo"\nversion = "2"'),
    ("permissions", SCRIPTED, '"fs.write", "fs.delete"', '"fs.write"'),
    ("allowed actions", SCRIPTED, '["write_file", "delete_file"]', '["write_file"]'),
    ("allowed paths", SCRIPTED, '"scratch/**"', '"scratch/*"'),
    ("approval risks", SCRIPTED, 'approval_risks = ["high"]',
     'approval_risks = ["medium", "high"]'),
    ("proposal budget", SCRIPTED, "proposals = 10", "proposals = 11"),
    ("step budget", SCRIPTED, "steps = 10", "steps = 9"),
    ("wall time budget", SCRIPTED, "wall_seconds = 120", "wall_seconds = 120.5"),
    ("cost budget", SCRIPTED, "cost_micros = 0", "cost_micros = 1"),
    ("environment adapter", SCRIPTED, 'adapter = "workspace"', 'adapter = "git"'),
    ("environment target", SCRIPTED, 'target = "workspace"', 'target = "workspace-b"'),
    ("step content", SCRIPTED, 'content = "max_orders = 3\\n"', 'content = "max_orders = 4\\n"'),
    ("step risk", SCRIPTED, 'risk = "high"', 'risk = "medium"'),
    ("step executable", SCRIPTED, 'content = "temporary notes\\n"',
     'content = "temporary notes\\n"\nexecutable = true'),
    ("verifier expectation", SCRIPTED, '"config/limits.toml" = "max_orders = 3\\n"',
     '"config/limits.toml" = "max_orders = 4\\n"'),
    ("verifier absent list", SCRIPTED, 'absent = ["scratch/notes.txt"]', 'absent = []'),
    ("verifier kind", SCRIPTED, 'kind = "files-equal"', 'kind = "always"'),
    ("replay range", REPLAY, 'range = "last:8"', 'range = "last:7"'),
    ("replay source", REPLAY, 'source = "source"', 'source = "other-source"'),
    ("replay setup", REPLAY, 'setup = "clone-at-base"', 'setup = "none"'),
]


@pytest.mark.parametrize(("base", "old", "new"), [c[1:] for c in SPEC_CHANGES],
                         ids=[c[0] for c in SPEC_CHANGES])
def test_it_changes_when_a_covered_spec_item_changes(tmp_path: Path, base: str, old: str,
                                                     new: str) -> None:
    assert old in base
    if base is SCRIPTED and new == 'kind = "always"':
        changed = base.split("[verifier]")[0] + '[verifier]\nkind = "always"\n'
    else:
        changed = base.replace(old, new, 1)

    assert _fingerprint(tmp_path / "a", base) != _fingerprint(tmp_path / "b", changed)


@pytest.mark.parametrize("field", ["instance_id", "version", "state_fingerprint"])
def test_it_changes_when_the_observed_initial_state_changes(tmp_path: Path, field: str) -> None:
    other = {"instance_id": "env-2", "version": "w1",
             "state_fingerprint": digest(DigestKind.ENVIRONMENT, {"files": ["x"]})}[field]

    before = _fingerprint(tmp_path, SCRIPTED)
    after = _fingerprint(tmp_path, SCRIPTED, replace(Initial(), **{field: other}))

    assert before != after


def test_it_is_stable_for_edits_that_change_nothing(tmp_path: Path) -> None:
    baseline = _fingerprint(tmp_path, SCRIPTED)
    commented = "# a new comment\n" + SCRIPTED.replace("[task]\n", "[task]  # the task\n")
    reordered = SCRIPTED.replace('id = "scripted-demo"\nversion = "1"',
                                 'version = "1"\nid = "scripted-demo"')
    assert reordered != SCRIPTED

    assert _fingerprint(tmp_path, SCRIPTED) == baseline
    assert _fingerprint(tmp_path, commented) == baseline
    assert _fingerprint(tmp_path, reordered) == baseline
    spec = load_task_spec(write_task(tmp_path, SCRIPTED))
    assert scenario_fingerprint(TaskSpec.from_json(spec.model_dump(mode="json")),
                                Initial()) == baseline


def test_it_leaves_the_version_combination_to_its_own_check(tmp_path: Path) -> None:
    # [versions] is compared on its own (VersionSet) so a versioned migrator can allow a resume
    # under a new model or prompt; folding it in here would make such a migrator useless.
    with_versions = SCRIPTED.replace("[policy]\n", '[versions]\nmodel = "m-2"\n\n[policy]\n', 1)

    assert _fingerprint(tmp_path / "a", SCRIPTED) == _fingerprint(tmp_path / "a", with_versions)

