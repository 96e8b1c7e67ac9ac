"""Story: a run whose planner offers the adapter's actions, but whose policy allows none, is never created.

A fresh user wrote an external (gateway-driven) task with ``allowed_actions = ["commit"]`` on a
workspace: the run was created, and every later status call for it failed, because the gateway
had no tool to offer. The chat-tools planner has the same shape. ``load_task_spec`` now refuses
such a spec with a typed ``PolicyActionsError`` naming the actions the adapter offers
(``runtime.taskspec.offered_actions``, DESIGN.md section 5.12), before any run exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.errors import PolicyActionsError, TaskSpecError
from runtime.models import Run
from runtime.taskspec import TaskSpec, load_task_spec
from tests.gateway.support import write_external_task
from tests.planners.chat_tools.support import write_chat_task


def test_it_refuses_an_external_task_whose_policy_allows_none_of_the_adapters_actions(tmp_path: Path) -> None:
    task = write_external_task(tmp_path, allowed_actions=("commit",))

    with pytest.raises(PolicyActionsError) as caught:
        load_task_spec(task)

    error = caught.value
    assert isinstance(error, TaskSpecError)  # callers that handle a bad spec handle this one too
    assert "task spec task.toml is invalid" in error.message
    assert ("policy.allowed_actions: lists commit, none of the actions adapter 'workspace' offers the "
            "'runtime.planners.external:ExternalPlanner' planner (write_file, delete_file)") in error.message
    assert error.context == {"file": "task.toml", "adapter": "workspace", "offered": "write_file, delete_file"}
    assert "the run was not created" in str(error)


def test_it_refuses_an_empty_allowed_actions_list_too(tmp_path: Path) -> None:
    task = write_external_task(tmp_path, allowed_actions=())

    with pytest.raises(PolicyActionsError, match="lists nothing, none of the actions adapter 'workspace'"):
        load_task_spec(task)


def test_it_refuses_a_chat_tools_task_the_same_way(tmp_path: Path) -> None:
    task = write_chat_task(tmp_path, base_url="http://127.0.0.1:9/v1")
    text = task.read_text(encoding="utf-8")
    task.write_text(text.replace('allowed_actions = ["write_file", "delete_file"]', 'allowed_actions = ["commit"]'),
                    encoding="utf-8")

    with pytest.raises(PolicyActionsError, match=r"'chat-tools' planner \(write_file, delete_file\)"):
        load_task_spec(task)


def test_it_accepts_a_policy_that_allows_one_of_the_adapters_actions(tmp_path: Path) -> None:
    spec = load_task_spec(write_external_task(tmp_path, allowed_actions=("write_file", "commit")))

    assert spec.policy.allowed_actions == ["write_file", "commit"]
    # A stored spec is not re-checked on resume: a run created before the check stays readable.
    assert TaskSpec.from_json(spec.model_dump(mode="json")) == spec


@pytest.mark.django_db(transaction=True)
def test_it_creates_no_run_for_such_a_task(tmp_path: Path) -> None:
    with pytest.raises(PolicyActionsError):
        run_start(spec_path=write_external_task(tmp_path, allowed_actions=("commit",)))

    assert not Run.objects.exists()
    assert not any((tmp_path / "ws").iterdir())
