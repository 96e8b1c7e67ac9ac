"""Story: a platform engineer writes a task spec and gets every mistake named at once.

Each bad field is reported by its TOML path with the reason, in one ``TaskSpecError`` that also
names the file; TOML syntax errors give the line and column. A valid spec round-trips through
the JSON form stored with the run.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from runtime.errors import TaskSpecError
from runtime.taskspec import (
    GitHistoryPlannerSpec,
    ScriptedPlannerSpec,
    TaskSpec,
    load_task_spec,
)
from tests.planners.gitrepo import FIXTURES, SHIPPED, write_task

SCRIPTED = (FIXTURES / "scripted.toml").read_text(encoding="utf-8")
REPLAY = (FIXTURES / "git_replay.toml").read_text(encoding="utf-8")
SIMPLE_VERIFIER = '[verifier]\nkind = "files-equal"\n'


def _load(tmp_path: Path, text: str) -> TaskSpec:
    return load_task_spec(write_task(tmp_path, text))


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, f"fixture no longer contains {old!r}"
    return text.replace(old, new, 1)


@pytest.mark.parametrize("path", sorted(SHIPPED.glob("*.toml")) + sorted(
    p for p in FIXTURES.glob("*.toml") if p.name != "many_mistakes.toml"), ids=lambda p: p.name)
def test_it_loads_the_shipped_and_fixture_tasks(path: Path) -> None:
    spec = load_task_spec(path)

    assert Path(spec.environment.target).is_absolute()
    assert TaskSpec.from_json(spec.model_dump(mode="json")) == spec


def test_it_names_every_bad_field_in_one_message() -> None:
    with pytest.raises(TaskSpecError) as caught:
        load_task_spec(FIXTURES / "many_mistakes.toml")

    message = str(caught.value)
    assert "many_mistakes.toml" in message
    for expected in (
        "task.version: Input should be a valid string",
        "task.colour: unknown field",
        "policy.allowed_paths[0]: glob pattern must be relative",
        "policy.approval_risks[0]: Input should be 'low', 'medium' or 'high'",
        "policy.budgets.steps: Input should be greater than or equal to 0",
        "policy.budgets.wall_seconds: Input should be a valid number",
        "environment.adapter: no ratchet.adapters plug-in named 'ftp'",
        "planner.range: range 'HEAD' must be 'A..B' or 'last:N'",
    ):
        assert expected in message
    assert caught.value.context == {"file": "many_mistakes.toml"}


CASES = [
    ("unknown field", SCRIPTED, '[task]\n', '[task]\nowner = "me"\n',
     "task.owner: unknown field"),
    ("unknown section", SCRIPTED, '[task]\n', '[extras]\nx = 1\n\n[task]\n',
     "extras: unknown field"),
    ("wrong type", SCRIPTED, 'version = "1"', 'version = 1',
     "task.version: Input should be a valid string"),
    ("negative budget", SCRIPTED, "steps = 10", "steps = -1",
     "policy.budgets.steps: Input should be greater than or equal to 0"),
    ("negative wall time", SCRIPTED, "wall_seconds = 120", "wall_seconds = -0.5",
     "policy.budgets.wall_seconds: Input should be greater than or equal to 0"),
    ("infinite wall time", SCRIPTED, "wall_seconds = 120", "wall_seconds = inf",
     "policy.budgets.wall_seconds: Input should be a finite number"),
    ("budget as string", SCRIPTED, "proposals = 10", 'proposals = "10"',
     "policy.budgets.proposals: Input should be a valid integer"),
    ("missing budgets", SCRIPTED, "[policy.budgets]", "[unused_budgets]",
     "policy.budgets: Field required"),
    ("unknown planner kind", SCRIPTED, 'kind = "scripted"', 'kind = "llm"',
     "planner.kind: no ratchet.planners plug-in named 'llm'; installed: "),
    ("missing planner kind", SCRIPTED, 'kind = "scripted"', '',
     "planner.kind: Field required"),
    ("unknown verifier kind", SCRIPTED, 'kind = "files-equal"', 'kind = "vibes"',
     "verifier.kind: no ratchet.verifiers plug-in named 'vibes'"),
    ("unknown adapter", SCRIPTED, 'adapter = "workspace"', 'adapter = "browser"',
     "environment.adapter: no ratchet.adapters plug-in named 'browser'"),
    ("unknown risk", SCRIPTED, 'approval_risks = ["high"]', 'approval_risks = ["severe"]',
     "policy.approval_risks[0]: Input should be 'low', 'medium' or 'high'"),
    ("duplicate action", SCRIPTED, '["write_file", "delete_file"]',
     '["write_file", "write_file"]', "policy.allowed_actions: 'write_file' is listed twice"),
    ("absolute glob", SCRIPTED, '"README.md", "config', '"/README.md", "config',
     "policy.allowed_paths[0]: glob pattern must be relative"),
    ("step escapes", SCRIPTED, 'target = "README.md"', 'target = "../README.md"',
     "planner.steps[0].target: path has an empty, '.' or '..' component"),
    ("step into .git", SCRIPTED, 'target = "README.md"', 'target = ".git/config"',
     "planner.steps[0].target: paths into .git are not allowed"),
    # The adapter's own path rule, applied at load time (DESIGN.md section 2.2).
    ("step into the journal", SCRIPTED, 'target = "README.md"', 'target = ".ratchet/journal"',
     "planner.steps[0].target: path is inside the workspace adapter's own .ratchet directory"),
    ("step into the journal, other case", SCRIPTED, 'target = "README.md"', 'target = ".RATCHET/x"',
     "planner.steps[0].target: path is inside the workspace adapter's own .ratchet directory"),
    ("step with a backslash", SCRIPTED, 'target = "README.md"', 'target = "docs\\\\README.md"',
     "planner.steps[0].target: path contains a backslash or a control character"),
    ("step with a control character", SCRIPTED, 'target = "README.md"', 'target = "READ\\u0007ME.md"',
     "planner.steps[0].target: path contains a backslash or a control character"),
    ("absolute step", SCRIPTED, 'target = "README.md"', 'target = "/etc/passwd"',
     "planner.steps[0].target: absolute paths are not allowed"),
    ("drive letter step", SCRIPTED, 'target = "README.md"', 'target = "C:/x.md"',
     "planner.steps[0].target: path must be relative to the environment target"),
    ("bidi override in a step", SCRIPTED, 'target = "README.md"', 'target = "README\\u202Edm.exe"',
     "planner.steps[0].target: path holds invisible characters (U+202E RIGHT-TO-LEFT OVERRIDE)"),
    ("zero-width space in a verifier file", SCRIPTED, '"README.md" = "# Demo', '"READ\\u200BME.md" = "# Demo',
     "path holds invisible characters (U+200B ZERO WIDTH SPACE)"),
    ("verifier absent into the journal", SCRIPTED, 'absent = ["scratch/notes.txt"]',
     'absent = [".ratchet/receipts"]',
     "verifier.absent[0]: path is inside the workspace adapter's own .ratchet directory"),
    ("bidi override in a glob", SCRIPTED, '"README.md", "config', '"READ\\u202EME.md", "config',
     "policy.allowed_paths[0]: glob pattern holds invisible characters (U+202E"),
    ("content and delete", SCRIPTED, 'content = "temporary notes\\n"',
     'content = "temporary notes\\n"\ndelete = true',
     "planner.steps[1]: a delete_file step takes no content"),
    ("write without content", SCRIPTED, 'content = "max_orders = 3\\n"', '',
     "planner.steps[2]: a write_file step needs content"),
    ("bad step risk", SCRIPTED, 'risk = "high"', 'risk = "urgent"',
     "planner.steps[2].risk: Input should be 'low', 'medium' or 'high'"),
    ("verifier file escapes", SCRIPTED, '"README.md" = "# Demo', '"../README.md" = "# Demo',
     'verifier.files["../README.md"]: path has an empty'),
    ("range without dots", REPLAY, 'range = "last:8"', 'range = "HEAD"',
     "planner.range: range 'HEAD' must be 'A..B' or 'last:N'"),
    ("symmetric range", REPLAY, 'range = "last:8"', 'range = "a...b"',
     "planner.range: range 'a...b' must be 'A..B' or 'last:N'"),
    ("empty base", REPLAY, 'range = "last:8"', 'range = "..main"',
     "planner.range: range '..main' has an empty or malformed base revision"),
    ("option injection", REPLAY, 'range = "last:8"', 'range = "--output=x..main"',
     "planner.range: range '--output=x..main' has an empty or malformed base revision"),
    ("last zero", REPLAY, 'range = "last:8"', 'range = "last:0"',
     "planner.range: last:N needs 1 <= N <= 5000, got 0"),
    ("last not a number", REPLAY, 'range = "last:8"', 'range = "last:ten"',
     "planner.range: range 'last:ten' must be last:N with N a positive integer"),
    ("replay on workspace", REPLAY, 'adapter = "git"', 'adapter = "workspace"',
     "environment.adapter: the git-history planner proposes commit actions"),
    ("tree verifier without replay", SCRIPTED.split("[verifier]")[0] + SIMPLE_VERIFIER,
     'kind = "files-equal"',
     'kind = "tree-equals-source"', "verifier.kind: tree-equals-source compares with the"),
    ("clone without replay", SCRIPTED, 'target = "workspace"',
     'target = "workspace"\nsetup = "clone-at-base"',
     "environment.setup: clone-at-base needs a git-history planner"),
]


@pytest.mark.parametrize(("base", "old", "new", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_it_rejects_a_bad_field_naming_it(tmp_path: Path, base: str, old: str, new: str,
                                          expected: str) -> None:
    with pytest.raises(TaskSpecError) as caught:
        _load(tmp_path, _edit(base, old, new))

    assert expected in str(caught.value)
    assert "task.toml" in str(caught.value)


def test_it_gives_line_and_column_for_a_toml_syntax_error(tmp_path: Path) -> None:
    text = _edit(SCRIPTED, 'version = "1"', 'version = "1')

    with pytest.raises(TaskSpecError, match=r"task.toml is not valid TOML: .*line 6, column"):
        _load(tmp_path, text)


def test_it_names_a_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(TaskSpecError, match="missing.toml cannot be read"):
        load_task_spec(tmp_path / "missing.toml")


def test_it_resolves_paths_against_the_task_file_directory(tmp_path: Path) -> None:
    spec = _load(tmp_path / "tasks", REPLAY)

    assert spec.planner.kind == "git-history"
    options = GitHistoryPlannerSpec.model_validate(spec.planner.options_json())
    assert options.source == str(tmp_path / "tasks" / "source")
    assert spec.resolve_target() == tmp_path / "tasks" / "target"


def test_it_infers_the_step_kind_and_stores_it_explicitly(tmp_path: Path) -> None:
    spec = _load(tmp_path, SCRIPTED)

    assert ScriptedPlannerSpec.model_validate(spec.planner.options_json()).steps[3].kind == "delete_file"
    stored = spec.model_dump(mode="json")["planner"]["steps"]
    assert [s["kind"] for s in stored] == ["write_file", "write_file", "write_file",
                                           "delete_file"]
    assert stored[3]["delete"] is True and stored[3]["content"] is None


def test_it_refuses_a_tampered_stored_copy(tmp_path: Path) -> None:
    stored = _load(tmp_path, SCRIPTED).model_dump(mode="json")
    stored["policy"]["budgets"]["steps"] = -5
    stored["policy"]["sneaky"] = True

    with pytest.raises(TaskSpecError) as caught:
        TaskSpec.from_json(stored)
    assert "policy.budgets.steps: Input should be greater than or equal to 0" in str(caught.value)
    assert "policy.sneaky: unknown field" in str(caught.value)


def test_it_builds_the_checkpoint_views(tmp_path: Path) -> None:
    spec = _load(tmp_path, SCRIPTED)

    assert spec.budget_limits().model_dump() == {"proposals": 10, "steps": 10,
                                                 "wall_seconds": 120.0, "cost_micros": 0}
    assert spec.version_set().model == "none"
    scope = spec.scope(principal="agent@default")
    assert scope.allowed_actions == ["write_file", "delete_file"]
    assert scope.policy_version == "1" and [str(r) for r in scope.approval_risks] == ["high"]


def test_its_error_survives_a_celery_boundary(tmp_path: Path) -> None:
    with pytest.raises(TaskSpecError) as caught:
        _load(tmp_path, _edit(SCRIPTED, "steps = 10", "steps = -1"))

    clone = pickle.loads(pickle.dumps(caught.value))
    assert str(clone) == str(caught.value)


@pytest.mark.parametrize("depth", [65, 500, 1000, 20_000])
def test_it_refuses_deeply_nested_arrays_and_tables_with_a_typed_error(tmp_path: Path, depth: int) -> None:
    """TOML nested ~500-1000 deep once gave a raw RecursionError (DESIGN.md section 2.2)."""
    arrays = SCRIPTED.replace('version = "1"', 'version = "1"\nextra = ' + "[" * depth + "]" * depth, 1)
    tables = SCRIPTED.replace('version = "1"', 'version = "1"\nextra = ' + "{a = " * depth + "1" + "}" * depth, 1)

    for text in (arrays, tables):
        with pytest.raises(TaskSpecError, match="nests more than 64 levels deep"):
            _load(tmp_path, text)


def test_it_still_reads_nesting_up_to_the_limit_and_names_the_field(tmp_path: Path) -> None:
    text = SCRIPTED.replace('version = "1"', 'version = "1"\nextra = ' + "[" * 60 + "]" * 60, 1)

    with pytest.raises(TaskSpecError, match=r"task\.extra: unknown field"):
        _load(tmp_path, text)


def test_it_refuses_a_deeply_nested_stored_copy(tmp_path: Path) -> None:
    stored = _load(tmp_path, SCRIPTED).model_dump(mode="json")
    deep: list = []
    for _ in range(3000):
        deep = [deep]
    stored["environment"]["options"] = {"deep": deep}

    with pytest.raises(TaskSpecError, match="stored task spec nests more than 64 levels deep"):
        TaskSpec.from_json(stored)


@pytest.mark.parametrize("target", ["out/.ratchet-tmp-x", ".ratchet-tmp-1", "a/b/.Ratchet-Tmp-2/c.txt"])
def test_f11_a_temporary_name_of_the_workspace_adapter_is_refused_at_load_at_any_depth(
        tmp_path: Path, target: str) -> None:
    """The adapter refuses these names mid-run (the run would load, then freeze): the loader
    refuses them first, with the field named."""
    with pytest.raises(TaskSpecError) as caught:
        _load(tmp_path, _edit(SCRIPTED, 'target = "README.md"', f'target = "{target}"'))

    assert "planner.steps[0].target: path has a name starting with the workspace adapter's temporary " \
           "prefix .ratchet-tmp-" in str(caught.value)
