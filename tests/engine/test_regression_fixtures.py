"""Story: five recorded runs replay to the same result on the current versions (DESIGN.md section 8).

``runtime/regression/fixtures/<name>.json`` (product data: ``manage.py regress`` replays them
against a combination, ``runtime.regression.replay``) each hold one run, recorded from a real run:

* ``input``: the task spec (TOML text), the source history it needs, and the scenario -- the
  engine calls and the faults injected between them;
* ``output``: final phase, stop reason, writes (and which were reconciled), verifier verdicts,
  what is left pending, open review cases;
* ``tool_trace``: the trace, event by event, with the fields that do not depend on the run id,
  the clock or a random instance id (keys become ``key#<cursor>``);
* ``side_effects``: the environment's own record of every write (workspace journal receipts or
  keyed git commits), with content digests.

The five runs: ``normal`` (five workspace writes, verified), ``rejected`` (a write outside the
policy's paths is refused: zero effect), ``timed_out`` (a git commit lands but the adapter call
times out; the outcome is settled by key, one effect), ``cancelled`` (an operator cancels with
a write pending: it is dropped, no effect) and ``duplicate_request`` (the pending request is
delivered twice more directly; one effect, reconciled).

Replaying each fixture must reproduce everything. To re-record after an intended change::

    RATCHET_REGEN_FIXTURES=1 .venv/bin/python -m pytest tests/engine/test_regression_fixtures.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from runtime.regression.replay import FIXTURES as REGRESS_FIXTURES
from runtime.regression.replay import regress_observe, regress_play
from tests.engine.support import (
    SOURCE_COMMITS,
    WORKSPACE_FINAL,
    WORKSPACE_STEPS,
    replay_task_text,
    scripted_task_text,
)

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURES = REGRESS_FIXTURES
REGENERATE = os.environ.get("RATCHET_REGEN_FIXTURES") == "1"

SCENARIOS: dict[str, dict[str, Any]] = {
    "normal": {
        "task": scripted_task_text(WORKSPACE_STEPS, files=WORKSPACE_FINAL, absent=["notes.txt"],
                                   task_id="regression-normal"),
        "source": None,
        "scenario": [{"step": "start"}, {"step": "advance"}],
    },
    "rejected": {
        "task": scripted_task_text(
            [{"target": "README.md", "content": "# Allowed\n"},
             {"target": "secrets/token.txt", "content": "not allowed\n"},
             {"target": "README.md", "content": "# Never reached\n"}],
            allowed_paths=("README.md", "docs/**"), task_id="regression-rejected"),
        "source": None,
        "scenario": [{"step": "start"}, {"step": "advance"}],
    },
    "timed_out": {
        "task": replay_task_text("source"),
        "source": "small-history",
        "scenario": [
            {"step": "start"},
            {"step": "advance", "max_steps": 2},
            {"step": "hang_git_update_ref", "times": 1, "after_update": True,
             "timeout_seconds": 1.5},
            {"step": "advance"},
        ],
    },
    "cancelled": {
        "task": scripted_task_text(WORKSPACE_STEPS, files=WORKSPACE_FINAL, absent=["notes.txt"],
                                   task_id="regression-cancelled"),
        "source": None,
        "scenario": [
            {"step": "start"},
            # the first write, and in its receipt's commit the second one proposed (one commit
            # per write, DESIGN.md section 4.13): the second is pending
            {"step": "advance", "max_steps": 2},
            {"step": "cancel", "by": "operator@example.org"},
            {"step": "advance"},
        ],
    },
    "duplicate_request": {
        "task": scripted_task_text(WORKSPACE_STEPS, files=WORKSPACE_FINAL, absent=["notes.txt"],
                                   task_id="regression-duplicate-request"),
        "source": None,
        "scenario": [
            {"step": "start"},
            {"step": "advance", "max_steps": 2},  # the second write pending, as above
            {"step": "deliver_pending_again", "times": 2},
            {"step": "advance"},
        ],
    },
}


# --- the stories ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_it_replays_the_recorded_run(name: str, tmp_path: Path) -> None:
    path = FIXTURES / f"{name}.json"
    if REGENERATE:
        given = SCENARIOS[name]
    else:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        given = recorded["input"]

    actual = {"name": name, "input": given, **regress_observe(regress_play(given, tmp_path))}

    if REGENERATE:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    else:
        assert actual["output"] == recorded["output"]
        assert actual["tool_trace"] == recorded["tool_trace"]
        assert actual["side_effects"] == recorded["side_effects"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_it_keeps_one_effect_per_key_in_every_recorded_run(name: str) -> None:
    recorded = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    keys = [effect["idempotency_key"] for effect in recorded["side_effects"]]
    assert len(keys) == len(set(keys)) == recorded["output"]["writes"]
    assert all(not k.startswith("key#?") for k in keys)
    expected = {
        "normal": ("completed", "verified", 5),
        "rejected": ("failed", "policy_violation", 1),
        "timed_out": ("completed", "verified", SOURCE_COMMITS),
        "cancelled": ("cancelled", "cancelled", 1),
        "duplicate_request": ("completed", "verified", 5),
    }[name]
    out = recorded["output"]
    assert (out["phase"], out["stop_reason"], out["writes"]) == expected
    types = [e["type"] for e in recorded["tool_trace"]]
    if name == "timed_out":
        assert types.index("write.outcome_unknown") < types.index("write.reconciled")
    if name == "duplicate_request":
        assert [e["reconciled"] for e in out["executed"]] == [False, True, False, False, False]
    if name == "rejected":
        assert "run.policy_violation" in types and out["pending"] is None
    if name == "cancelled":
        dropped = next(e for e in recorded["tool_trace"] if e["type"] == "run.cancelled")
        assert dropped["dropped_pending"]["idempotency_key"] not in keys
