"""Story: the scripted planner proposes the spec's steps in order, the same way in every process.

Determinism is what lets the engine derive the idempotency key before a write and recognise the
same intent after a crash (DESIGN.md section 5); a planner that varied by process would turn a
recovery into a receipt conflict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import Risk
from runtime.errors import PlannerError, PlannerStateError
from runtime.planners.base import Done
from runtime.planners.factory import build_planner
from runtime.planners.scripted import ScriptedPlanner
from runtime.taskspec import ScriptedPlannerSpec, load_task_spec
from tests.planners.gitrepo import FIXTURES, BlobStore, observation

REPO_ROOT = Path(__file__).resolve().parents[2]


def _proposals(task: Path) -> list:
    planner = build_planner(load_task_spec(task))
    state = planner.init_state()
    blobs = BlobStore()
    return [planner.propose(cursor=i, planner_state=state, observation=observation(),
                            put_blob=blobs.put) for i in range(5)]


def test_it_proposes_the_steps_in_order_then_done() -> None:
    proposals = _proposals(FIXTURES / "scripted.toml")

    assert [(p.kind, p.target, p.risk) for p in proposals[:4]] == [
        ("write_file", "README.md", Risk.LOW),
        ("write_file", "scratch/notes.txt", Risk.LOW),
        ("write_file", "config/limits.toml", Risk.HIGH),
        ("delete_file", "scratch/notes.txt", Risk.LOW),
    ]
    assert proposals[3].params == {}
    assert isinstance(proposals[4], Done) and "4 scripted steps" in proposals[4].reason


def test_it_refers_to_content_by_the_digest_of_the_stored_bytes() -> None:
    planner = build_planner(load_task_spec(FIXTURES / "scripted.toml"))
    blobs = BlobStore()
    first = planner.propose(cursor=0, planner_state=planner.init_state(),
                            observation=observation(), put_blob=blobs.put)

    content = first.params["content"]
    assert content == digest_bytes(blobs.blobs[content])
    assert blobs.blobs[content].startswith(b"# Demo workspace\n")
    assert first.params["executable"] is False


def test_it_gives_the_same_intents_from_two_instances() -> None:
    one = [p.intent_digest() for p in _proposals(FIXTURES / "scripted.toml")[:4]]
    two = [p.intent_digest() for p in _proposals(FIXTURES / "scripted.toml")[:4]]

    assert one == two and len(set(one)) == 4


def test_it_gives_the_same_intents_in_another_process() -> None:
    here = [p.intent_digest() for p in _proposals(FIXTURES / "scripted.toml")[:4]]
    script = (
        "import json, sys\n"
        "from tests.planners.test_scripted_planner import _proposals\n"
        "from pathlib import Path\n"
        "print(json.dumps([p.intent_digest() for p in _proposals(Path(sys.argv[1]))[:4]]))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "DJANGO_SETTINGS_MODULE": "runtime.project.settings"}
    out = subprocess.run([sys.executable, "-c", script, str(FIXTURES / "scripted.toml")],
                         cwd=REPO_ROOT, env=env, capture_output=True, check=True, timeout=60)

    assert json.loads(out.stdout) == here


def test_it_refuses_the_state_of_another_step_list() -> None:
    spec = load_task_spec(FIXTURES / "scripted.toml")
    planner = build_planner(spec)
    steps = ScriptedPlannerSpec.model_validate(spec.planner.options_json()).steps
    other = ScriptedPlanner(options=ScriptedPlannerSpec(steps=steps[:2]))

    with pytest.raises(PlannerStateError):
        other.propose(cursor=0, planner_state=planner.init_state(), observation=observation(),
                      put_blob=BlobStore().put)


@pytest.mark.parametrize("cursor", [-1, True, 1.0])
def test_it_refuses_a_cursor_that_is_not_a_non_negative_int(cursor: object) -> None:
    planner = build_planner(load_task_spec(FIXTURES / "scripted.toml"))

    with pytest.raises(PlannerError):
        planner.propose(cursor=cursor, planner_state=planner.init_state(),  # type: ignore[arg-type]
                        observation=observation(), put_blob=BlobStore().put)
