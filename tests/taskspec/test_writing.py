"""Story: a tool writes a task spec from data and the loader reads back exactly that data.

The replay check, the benchmarks, the demo and the tests all write their git-history replay task
with ``runtime.taskspec.writing``; a value TOML cannot carry is refused, never written wrong.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from runtime.errors import TaskSpecError
from runtime.taskspec import load_task_spec
from runtime.taskspec.writing import replay_task, replay_task_write, toml_dumps, toml_value


def test_it_writes_toml_that_reads_back_as_the_same_document():
    document = {
        "plain": "text", "quoted key": "tab\there, quote \" and backslash \\", "del": "x\x7fy",
        "emoji": "\U0001f600 outside the BMP", "whole": -3, "real": 1.5, "big": 1e300,
        "infinite": float("-inf"), "flag": False, "empty": [], "mixed": [1, "two", [3.0]],
        "inline": {"$secret": "customer_email", "n": {"deep": True}},
        "table": {"x": 1, "nested": {"y": "z"}}, "tables_only": {"inner": {"k": 1}, "empty": {}},
        "rows": [{"target": "a.txt", "content": "1\n"}, {"target": "b.txt", "delete": True}],
    }

    assert tomllib.loads(toml_dumps(document, comment="first line\nsecond line")) == document


def test_it_puts_the_comment_first():
    text = toml_dumps({"a": 1}, comment="Written by a tool\nfor a reader")

    assert text.splitlines()[:3] == ["# Written by a tool", "# for a reader", ""]


@pytest.mark.parametrize("value", [None, b"bytes", object()])
def test_it_refuses_a_value_toml_cannot_carry(value):
    with pytest.raises(TaskSpecError, match="no TOML form"):
        toml_value(value)


def test_it_writes_a_replay_task_the_loader_accepts(tmp_path: Path):
    source = tmp_path / "a source with spaces"
    path = replay_task_write(path=tmp_path / "tasks" / "replay.toml", comment="a replay", task_id="replay-x",
                             source=source, range_="last:3", target="targets", approval_risks=("low",),
                             budget=7, wall_seconds=90, risk="low")

    spec = load_task_spec(path)

    assert (spec.task.id, spec.policy.id, spec.policy.approval_risks) == ("replay-x", "replay-x", ["low"])
    assert (spec.policy.budgets.proposals, spec.policy.budgets.steps, spec.policy.budgets.wall_seconds) == (7, 7, 90)
    assert spec.policy.permissions == ["git.commit"] and spec.versions.rules == "replay-v1"
    assert spec.environment.target == str(tmp_path / "tasks" / "targets")
    assert spec.environment.setup == "clone-at-base"
    assert (spec.planner.kind, spec.verifier.kind) == ("git-history", "tree-equals-source")
    planner = tomllib.loads(path.read_text(encoding="utf-8"))["planner"]
    assert planner == {"kind": "git-history", "source": str(source), "range": "last:3", "risk": "low"}


def test_it_leaves_out_what_is_not_given():
    task = replay_task(task_id="t", source="s", range_="a..b", target="t", policy_id="p", versions=None)

    assert "versions" not in task and "risk" not in task["planner"]
    assert task["policy"]["id"] == "p"
