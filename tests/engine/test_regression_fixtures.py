"""Story: five recorded runs replay to the same result on the current versions (DESIGN.md section 8).

``tests/fixtures/regression/<name>.json`` each hold one run, recorded from a real run:

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

import runtime.adapters.git_process as git_process
from runtime.attachments import attachment_get
from runtime.core.idempotency import derive_key
from runtime.core.ledger import state_ledger
from runtime.engine import run_advance, run_request_cancel, run_start
from runtime.models import Run, TraceEvent
from tests.engine.support import (
    REPLAY_TASK,
    SOURCE_COMMITS,
    WORKSPACE_FINAL,
    WORKSPACE_STEPS,
    build_small_history,
    install_hanging_git,
    restore,
    run_adapter,
    run_target,
    scripted_task_text,
    workspace_journal,
)
from tests.planners.gitrepo import git

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "regression"
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
        "task": REPLAY_TASK.format(source='"source"', count=SOURCE_COMMITS, risk="low",
                                   budget=40, approval_risks=""),
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
            {"step": "advance", "max_steps": 3},
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
            {"step": "advance", "max_steps": 3},
            {"step": "deliver_pending_again", "times": 2},
            {"step": "advance"},
        ],
    },
}


# --- playing a scenario -----------------------------------------------------------------------


def _deliver_pending_again(run_id: str, times: int) -> None:
    pending = restore(run_id).state.pending
    adapter = run_adapter(run_id)
    for _ in range(times):
        adapter.execute(pending.action, idempotency_key=pending.idempotency_key,
                        intent_digest=pending.intent_digest,
                        fencing_token=Run.objects.get(run_id=run_id).lease_version,
                        blobs=lambda d: attachment_get(digest=d))


def _play(given: dict[str, Any], directory: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    if given["source"] == "small-history":
        build_small_history(directory / "source")
    (directory / "workspace").mkdir()
    task = directory / "task.toml"
    task.write_text(given["task"], encoding="utf-8")
    run_id = ""
    for step in given["scenario"]:
        kind = step["step"]
        if kind == "start":
            run_id = run_start(spec_path=task)
        elif kind == "advance":
            run_advance(run_id=run_id, max_steps=step.get("max_steps"))
        elif kind == "cancel":
            run_request_cancel(run_id=run_id, requested_by=step["by"])
        elif kind == "deliver_pending_again":
            _deliver_pending_again(run_id, step["times"])
        elif kind == "hang_git_update_ref":
            wrapper = install_hanging_git(directory / "bin", limit=step["times"],
                                          after_update=step["after_update"])
            monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}{os.environ['PATH']}")
            monkeypatch.setattr(git_process, "GIT_TIMEOUT_SECONDS", step["timeout_seconds"])
        else:
            raise AssertionError(f"unknown scenario step {kind!r}")
    return run_id


# --- recording what happened --------------------------------------------------------------------


class _Keys:
    """Replaces a run's idempotency keys by ``key#<cursor>`` (keys embed the random run id)."""

    def __init__(self, run_id: str) -> None:
        self.names = {derive_key(run_id=run_id, cursor=c, replan_epoch=e): f"key#{c}"
                      + (f"@{e}" if e else "") for c in range(64) for e in range(3)}

    def __call__(self, key: Any) -> Any:
        return self.names.get(key, key if key is None else "key#?")


def _event(event_type: str, payload: dict[str, Any], name: _Keys) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": event_type}
    for field in ("cursor", "intent_digest", "requires_approval", "reason", "passed", "attempts",
                  "keys", "duplicates", "requested_by", "phase", "generation", "task_id"):
        if field in payload:
            entry[field] = payload[field]
    if "idempotency_key" in payload:
        entry["idempotency_key"] = name(payload["idempotency_key"])
    if "missing" in payload:
        entry["missing"] = [name(k) for k in payload["missing"]]
    if isinstance(payload.get("action"), dict):
        action = payload["action"]
        entry["action"] = {k: action.get(k) for k in ("kind", "target", "risk")}
    if isinstance(payload.get("receipt"), dict):
        receipt = payload["receipt"]
        entry["receipt"] = {"idempotency_key": name(receipt["idempotency_key"]),
                            "intent_digest": receipt["intent_digest"],
                            "adapter_version": receipt["adapter_version"]}
    if isinstance(payload.get("dropped_pending"), dict):
        dropped = payload["dropped_pending"]
        entry["dropped_pending"] = {"idempotency_key": name(dropped["idempotency_key"]),
                                    "cursor": dropped["cursor"],
                                    "intent_digest": dropped["intent_digest"]}
    return entry


def _side_effects(run_id: str, name: _Keys) -> list[dict[str, Any]]:
    target = run_target(run_id)
    if Run.objects.get(run_id=run_id).spec["task"]["environment"]["adapter"] == "workspace":
        out = []
        for record in workspace_journal(target):
            if record["type"] != "committed":
                continue
            receipt = record["receipt"]
            out.append({"idempotency_key": name(record["key"]),
                        "intent_digest": receipt["intent_digest"],
                        "receipt_id": receipt["receipt_id"],
                        "environment_version_after": receipt["environment_version_after"],
                        **{k: receipt["result"].get(k) for k in ("op", "path", "content",
                                                                  "executable", "previous")}})
        return out
    out = []
    log = git(target, "log", "--reverse", "--format=%H%x1f%T%x1f%s%x1f"
              "%(trailers:key=Idempotency-Key,valueonly,separator=%x2c)%x1f"
              "%(trailers:key=Intent-Digest,valueonly,separator=%x2c)", "HEAD")
    for line in log.splitlines():
        sha, tree, subject, keys, intents = line.split("\x1f")
        if not keys:
            continue
        changed = git(target, "diff-tree", "-r", "--no-commit-id", "--no-renames", sha)
        files = {}
        for row in changed.splitlines():
            meta, path = row.split("\t", 1)
            _, new_mode, _, new_blob, status = meta.lstrip(":").split(" ")
            files[path] = None if status == "D" else f"{new_mode} {new_blob}"
        out.append({"idempotency_key": name(keys), "intent_digest": intents, "subject": subject,
                    "tree": tree, "files": files})
    return out


def _record(run_id: str) -> dict[str, Any]:
    name = _Keys(run_id)
    state = restore(run_id).state
    executed = state_ledger(state).executed_writes()
    output = {
        "phase": state.phase.value,
        "stop_reason": state.stop_reason.value if state.stop_reason else None,
        "writes": len(executed),
        "executed": [{"idempotency_key": name(w.idempotency_key), "cursor": w.cursor,
                      "reconciled": w.reconciled, "result_summary": w.result_summary}
                     for w in executed],
        "verifier": [r.passed for r in state.verifier_results],
        "pending": None if state.pending is None else {
            "idempotency_key": name(state.pending.idempotency_key),
            "cursor": state.pending.cursor, "intent_digest": state.pending.intent_digest},
        "review_cases": [c.reason.value for c in state.review_cases],
    }
    events = TraceEvent.objects.filter(run_id=run_id).order_by("seq")
    trace = [_event(e.event_type, e.payload, name) for e in events]
    return {"output": output, "tool_trace": trace, "side_effects": _side_effects(run_id, name)}


# --- the stories ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_it_replays_the_recorded_run(name: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = FIXTURES / f"{name}.json"
    if REGENERATE:
        given = SCENARIOS[name]
    else:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        given = recorded["input"]

    actual = {"name": name, "input": given, **_record(_play(given, tmp_path, monkeypatch))}

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
