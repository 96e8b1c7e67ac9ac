"""Story: the policy stops an action outside the allowed scope before anything is executed.

An action kind that is not allowlisted, a path outside ``allowed_paths`` -- for a commit, any
one of its changes -- or an unsafe path (absolute, ``..``, inside ``.git``) is a
``PolicyViolationError`` naming the kind and path. Approvals are required by risk.
"""

from __future__ import annotations

import pickle

import pytest

from runtime.core.checkpoint import Action, Risk
from runtime.errors import PolicyViolationError
from runtime.taskspec import glob_match, load_task_spec, needs_approval, policy_check
from tests.planners.gitrepo import FIXTURES, SHIPPED

DIGEST = "sha256:" + "a" * 64


def _write(path: str, risk: Risk = Risk.LOW) -> Action:
    return Action(kind="write_file", target=path, params={"content": DIGEST, "executable": False},
                  risk=risk)


def _commit(*paths: str) -> Action:
    changes = [{"op": "write", "path": p, "content": DIGEST, "executable": False} for p in paths]
    return Action(kind="commit", params={"message": "m", "author_name": "a",
                                         "author_email": "a@example.org",
                                         "author_date": "2024-01-01T00:00:00+00:00",
                                         "changes": changes})


@pytest.fixture
def demo():
    return load_task_spec(FIXTURES / "scripted.toml")


def test_it_allows_an_action_inside_the_scope(demo) -> None:
    for path in ("README.md", "config/limits.toml", "scratch/a/b/c.txt"):
        policy_check(demo, _write(path))
    policy_check(demo, Action(kind="delete_file", target="scratch/notes.txt"))


def test_it_rejects_an_action_kind_not_allowlisted(demo) -> None:
    with pytest.raises(PolicyViolationError) as caught:
        policy_check(demo, Action(kind="send_email", target="ceo@example.org"), run_id="run-7")

    assert caught.value.context == {"action_kind": "send_email", "run_id": "run-7"}


@pytest.mark.parametrize("path", ["src/main.py", "config/deep/x.toml", "config/x.yaml",
                                  "readme.md"])
def test_it_rejects_a_path_outside_allowed_paths(demo, path: str) -> None:
    with pytest.raises(PolicyViolationError, match="outside the policy's allowed_paths"):
        policy_check(demo, _write(path))


def test_it_checks_every_change_of_a_commit() -> None:
    spec = load_task_spec(SHIPPED / "replay_history.toml")
    policy_check(spec, _commit("a.txt", "docs/b.md"))
    narrow = spec.model_copy(update={"policy": spec.policy.model_copy(
        update={"allowed_paths": ["docs/**"]})})

    with pytest.raises(PolicyViolationError) as caught:
        policy_check(narrow, _commit("docs/ok.md", "docs/also-ok.md", "secrets.env"))
    assert "secrets.env" in caught.value.context["path"]


@pytest.mark.parametrize("path", [".git/config", "sub/.git/hooks/pre-commit", ".GIT/HEAD",
                                  "../outside.txt", "a/../../b", "/etc/passwd", "a//b", "./a",
                                  ""])
def test_it_rejects_unsafe_paths_even_when_everything_is_allowed(path: str) -> None:
    spec = load_task_spec(SHIPPED / "replay_history.toml")  # allowed_paths = ["**"]

    with pytest.raises(PolicyViolationError, match="unsafe path"):
        policy_check(spec, _commit("fine.txt", path))


@pytest.mark.parametrize("params", [{}, {"changes": "all"}, {"changes": [{"op": "write"}]},
                                    {"changes": ["a.txt"]}])
def test_it_rejects_a_commit_with_malformed_changes(params: dict) -> None:
    spec = load_task_spec(SHIPPED / "replay_history.toml")

    with pytest.raises(PolicyViolationError):
        policy_check(spec, Action(kind="commit", params=params))


def test_it_checks_the_checkpoint_scope_like_the_spec(demo) -> None:
    scope = demo.scope(principal="agent@default")

    policy_check(scope, _write("README.md"))
    with pytest.raises(PolicyViolationError):
        policy_check(scope, _write("src/x.py"))
    with pytest.raises(PolicyViolationError):
        policy_check(scope, _commit("README.md"))  # commit is not allowlisted for the demo


def test_it_requires_approval_by_risk(demo) -> None:
    assert needs_approval(demo, _write("config/limits.toml", Risk.HIGH))
    assert not needs_approval(demo, _write("config/limits.toml", Risk.MEDIUM))
    assert not needs_approval(demo, _write("README.md", Risk.LOW))
    assert needs_approval(demo.scope(principal="p"), _write("README.md", Risk.HIGH))


def test_its_error_survives_a_celery_boundary(demo) -> None:
    with pytest.raises(PolicyViolationError) as caught:
        policy_check(demo, _write("src/x.py"), run_id="run-1")

    clone = pickle.loads(pickle.dumps(caught.value))
    assert type(clone) is PolicyViolationError and str(clone) == str(caught.value)


@pytest.mark.parametrize(("pattern", "path", "matches"), [
    ("**", "a/b/c.txt", True),
    ("src/**", "src/a/b.py", True),
    ("src/**", "src", False),
    ("**/*.md", "README.md", True),
    ("**/*.md", "docs/deep/x.md", True),
    ("*.md", "docs/x.md", False),
    ("docs/?.md", "docs/a.md", True),
    ("docs/?.md", "docs/ab.md", False),
    ("[ab].txt", "b.txt", True),
    ("[!ab].txt", "c.txt", True),
    ("[!ab].txt", "a.txt", False),
    ("Config/*.toml", "config/a.toml", False),
])
def test_it_matches_globs_like_fnmatch_with_double_star(pattern: str, path: str,
                                                        matches: bool) -> None:
    assert glob_match(pattern, path) is matches
