"""Recording a played regression run the way the fixtures hold it: the restored state, the trace
reduced to what does not depend on the run id or the clock, and the environment's own record of
every write (DESIGN.md section 8.5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.adapters.base import Adapter
from runtime.adapters.factory import open_adapter
from runtime.checkpoints.checks import Restored
from runtime.checkpoints.protocol import checkpoint_restore
from runtime.core.checkpoint import VersionSet
from runtime.models import Run
from runtime.planners.git_history.history_builder import history_git
from runtime.taskspec import TaskSpec, scenario_fingerprint

_FIELDS = ("cursor", "intent_digest", "requires_approval", "reason", "passed", "attempts", "keys",
           "duplicates", "requested_by", "phase", "generation", "task_id")


@dataclass(frozen=True)
class _Initial:
    instance_id: str
    version: str
    state_fingerprint: str


def regress_restore(run_id: str) -> Restored:
    """The run's committed checkpoint, restored exactly as the engine restores it."""
    run = Run.objects.get(run_id=run_id)
    spec = TaskSpec.from_json(run.spec["task"])
    initial = run.spec["initial"]
    scenario = scenario_fingerprint(spec, _Initial(instance_id=initial["instance_id"], version=initial["version"],
                                                   state_fingerprint=initial["state_fingerprint"]))
    return checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario,
                              versions=VersionSet(**spec.versions.model_dump()))


def run_adapter_open(run_id: str) -> Adapter:
    """A fresh adapter on the run's environment, as another caller would open it."""
    run = Run.objects.get(run_id=run_id)
    return open_adapter(run.spec["task"]["environment"]["adapter"], run.spec["target"])


def trace_entry(event_type: str, payload: dict[str, Any], name: Callable[[Any], Any]) -> dict[str, Any]:
    """One trace event as a fixture records it (``name`` renames idempotency keys)."""
    entry: dict[str, Any] = {"type": event_type}
    entry.update({f: payload[f] for f in _FIELDS if f in payload})
    if "idempotency_key" in payload:
        entry["idempotency_key"] = name(payload["idempotency_key"])
    if "missing" in payload:
        entry["missing"] = [name(k) for k in payload["missing"]]
    if isinstance(payload.get("action"), dict):
        entry["action"] = {k: payload["action"].get(k) for k in ("kind", "target", "risk")}
    if isinstance(payload.get("receipt"), dict):  # an event written before receipts were named by fingerprint
        receipt = payload["receipt"]
        entry["receipt"] = {"idempotency_key": name(receipt["idempotency_key"]),
                            "intent_digest": receipt["intent_digest"], "adapter_version": receipt["adapter_version"]}
    elif "receipt_fingerprint" in payload and "adapter_version" in payload:
        # The event names the receipt (key, intent, adapter) the ledger entry holds in full.
        entry["receipt"] = {"idempotency_key": name(payload["idempotency_key"]),
                            "intent_digest": payload["intent_digest"], "adapter_version": payload["adapter_version"]}
    if isinstance(payload.get("dropped_pending"), dict):
        dropped = payload["dropped_pending"]
        entry["dropped_pending"] = {"idempotency_key": name(dropped["idempotency_key"]),
                                    "cursor": dropped["cursor"], "intent_digest": dropped["intent_digest"]}
    return entry


def _journal(workspace: Path) -> list[dict[str, Any]]:
    text = (workspace / ".ratchet" / "journal.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def regress_side_effects(run_id: str, name: Callable[[Any], Any]) -> list[dict[str, Any]]:
    """Every write as the environment itself records it: workspace journal receipts, or keyed git
    commits with their trees and changed files."""
    run = Run.objects.get(run_id=run_id)
    target = Path(run.spec["target"])
    if run.spec["task"]["environment"]["adapter"] == "workspace":
        return [{"idempotency_key": name(r["key"]), "intent_digest": r["receipt"]["intent_digest"],
                 "receipt_id": r["receipt"]["receipt_id"],
                 "environment_version_after": r["receipt"]["environment_version_after"],
                 **{k: r["receipt"]["result"].get(k) for k in ("op", "path", "content", "executable", "previous")}}
                for r in _journal(target) if r["type"] == "committed"]
    out = []
    log = history_git(target, "log", "--reverse", "--format=%H%x1f%T%x1f%s%x1f"
                      "%(trailers:key=Idempotency-Key,valueonly,separator=%x2c)%x1f"
                      "%(trailers:key=Intent-Digest,valueonly,separator=%x2c)", "HEAD")
    for line in log.splitlines():
        sha, tree, subject, keys, intents = line.split("\x1f")
        if not keys:
            continue
        files = {}
        for row in history_git(target, "diff-tree", "-r", "--no-commit-id", "--no-renames", sha).splitlines():
            meta, path = row.split("\t", 1)
            _, new_mode, _, new_blob, status = meta.lstrip(":").split(" ")
            files[path] = None if status == "D" else f"{new_mode} {new_blob}"
        out.append({"idempotency_key": name(keys), "intent_digest": intents, "subject": subject,
                    "tree": tree, "files": files})
    return out
