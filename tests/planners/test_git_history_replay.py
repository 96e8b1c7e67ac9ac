"""Story: an operator replays the last eight commits of a repository onto a fresh clone.

The planner proposes one commit action per first-parent commit; applying them by hand (file
writes and ``git commit``) must reproduce the source tip's tree exactly, with every commit's
message and author carried over, and the tree-equals-source verifier must pass.
"""

from __future__ import annotations

from pathlib import Path

from runtime.core.checkpoint import Action
from runtime.planners.base import Done
from runtime.planners.factory import build_planner
from runtime.planners.git_history.planner import GitHistoryPlanner
from runtime.planners.git_history.replay_state import read_replay_state, replay_commits
from runtime.planners.git_history.replay_target import REPLAY_BRANCH
from runtime.taskspec import load_task_spec
from runtime.verifiers.builtin import verify
from tests.planners.gitrepo import (
    BINARY,
    UNICODE_NAME,
    BlobStore,
    History,
    apply_commit,
    commit_facts,
    git,
    observation,
)


def _plan(planner: GitHistoryPlanner | object, state: dict, blobs: BlobStore) -> list[Action]:
    actions: list[Action] = []
    for cursor in range(100):
        proposal = planner.propose(  # type: ignore[attr-defined]
            cursor=cursor, planner_state=state, observation=observation(), put_blob=blobs.put
        )
        if isinstance(proposal, Done):
            return actions
        actions.append(proposal)
    raise AssertionError("planner never said done")


def _changes(action: Action) -> dict[str, dict]:
    return {c["path"]: c for c in action.params["changes"]}


def test_it_replays_the_range_and_the_tree_equals_the_source_tip(replay_task: Path,
                                                                   history: History) -> None:
    spec = load_task_spec(replay_task)
    target = spec.resolve_target()
    planner = build_planner(spec)
    planner.prepare_environment(target)
    state = planner.init_state()
    assert git(target, "rev-parse", "HEAD").strip() == history.root
    assert git(target, "branch", "--show-current").strip() == REPLAY_BRANCH
    assert git(target, "remote").strip() == "", "the clone must not point back at the source"

    blobs = BlobStore()
    actions = _plan(planner, state, blobs)
    assert len(actions) == 8
    for action in actions:
        apply_commit(target, action, blobs)

    assert git(target, "rev-parse", "HEAD^{tree}") == git(history.path, "rev-parse",
                                                          f"{history.tip}^{{tree}}")
    replayed = git(target, "rev-list", "--reverse", f"{history.root}..HEAD").split()
    assert [commit_facts(target, c) for c in replayed] == [
        commit_facts(history.path, c) for c in history.first_parent
    ]
    outcome = verify(spec, observation("replayed"), target, planner_state=state)
    assert outcome.passed, outcome.detail
    assert "replayed" in outcome.detail


def test_it_pins_the_range_in_the_planner_state(replay_task: Path, history: History) -> None:
    state = build_planner(load_task_spec(replay_task)).init_state()

    assert state["kind"] == "git-history"
    assert state["base"] == history.root
    assert state["tip"] == history.tip
    assert replay_commits(read_replay_state(state)) == history.first_parent
    assert state["count"] == len(history.first_parent)
    assert Path(state["source"]).name == "source"


def test_it_carries_executable_binary_and_unicode_files(replay_task: Path,
                                                       history: History) -> None:
    planner = build_planner(load_task_spec(replay_task))
    blobs = BlobStore()
    actions = _plan(planner, planner.init_state(), blobs)

    run_script = _changes(actions[0])["scripts/run.sh"]
    assert run_script["op"] == "write" and run_script["executable"] is True
    logo = _changes(actions[1])["assets/logo.bin"]
    assert blobs.blobs[logo["content"]] == BINARY
    odd = _changes(actions[2])
    assert odd["remove_me.txt"] == {"op": "delete", "path": "remove_me.txt"}
    assert blobs.blobs[odd[UNICODE_NAME]["content"]] == "naïve ünïcode\n".encode()
    assert "日本語 file.txt" in odd
    # A mode-only change is a write of the same bytes with the executable flag set.
    app = _changes(actions[3])["src/app.py"]
    assert app["executable"] is True and blobs.blobs[app["content"]] == b"print('v2')\n"


def test_it_replays_a_merge_as_its_diff_against_the_first_parent(replay_task: Path,
                                                                  history: History) -> None:
    planner = build_planner(load_task_spec(replay_task))
    actions = _plan(planner, planner.init_state(), BlobStore())
    merge = actions[5]

    assert merge.params["message"].startswith("Merge branch 'feature'")
    assert sorted(_changes(merge)) == ["docs/guide.md", "feature/feature.py"]


def test_it_orders_deletes_before_writes(replay_task: Path, history: History) -> None:
    planner = build_planner(load_task_spec(replay_task))
    notes_dir = _plan(planner, planner.init_state(), BlobStore())[6]

    ops = [(c["op"], c["path"]) for c in notes_dir.params["changes"]]
    assert ops == [("delete", "notes"), ("write", "assets/logo.bin"),
                   ("write", "notes/today.md")]


def test_it_carries_the_message_verbatim_and_the_author_date_like_git(replay_task: Path,
                                                                       history: History) -> None:
    planner = build_planner(load_task_spec(replay_task))
    last = _plan(planner, planner.init_state(), BlobStore())[-1]

    raw = git(history.path, "cat-file", "commit", history.tip)
    assert last.params["message"] == raw.split("\n\n", 1)[1]
    assert last.params["message"].endswith("\n\n  Indented line kept.\n")
    assert last.params["author_name"] == "Zoë Ångström"
    assert last.params["author_email"] == "zoe@example.org"
    assert last.params["author_date"] == git(history.path, "log", "-1", "--format=%aI",
                                             history.tip).strip()
    assert last.params["author_date"] == "2024-01-10T09:00:00-03:30"


def test_it_proposes_the_same_intents_from_two_planner_instances(replay_task: Path,
                                                                  history: History) -> None:
    spec = load_task_spec(replay_task)
    first, second = build_planner(spec), build_planner(spec)
    state = first.init_state()
    assert second.init_state() == state

    one = [a.intent_digest() for a in _plan(first, state, BlobStore())]
    two = [a.intent_digest() for a in _plan(second, state, BlobStore())]
    assert one == two and len(set(one)) == 8


def test_it_names_the_same_commits_for_an_explicit_range(replay_task: Path,
                                                         history: History) -> None:
    by_count = build_planner(load_task_spec(replay_task)).init_state()
    explicit = GitHistoryPlanner(source=history.path, range=f"{history.root}..main").init_state()

    assert explicit["commits_digest"] == by_count["commits_digest"]
    assert explicit["base"] == by_count["base"] and explicit["tip"] == by_count["tip"]


def test_it_returns_done_past_the_last_commit(replay_task: Path, history: History) -> None:
    planner = build_planner(load_task_spec(replay_task))
    done = planner.propose(cursor=8, planner_state=planner.init_state(),
                           observation=observation(), put_blob=BlobStore().put)

    assert isinstance(done, Done)
    assert "8 commits" in done.reason
