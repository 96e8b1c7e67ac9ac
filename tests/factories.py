"""Factories for tests: valid run states, keyrings and personas. Prefer these over fixture files."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime.core.canonical import DigestKind, digest
from runtime.core.checkpoint import (
    BudgetLimits,
    EnvironmentRef,
    Phase,
    RunIdentity,
    RunState,
    Scope,
    VersionSet,
)
from runtime.core.signing import Keyring, SecretKey, TrustRoot
from runtime.taskspec.writing import toml_dumps


def make_keyring(root: TrustRoot | str = TrustRoot.CHECKPOINT, key_ids: tuple[str, ...] = ("k1",)) -> Keyring:
    """A keyring with fresh random keys; the first id is current."""
    return Keyring(root, {k: SecretKey.generate() for k in key_ids}, key_ids[0])


def scenario_fingerprint(**overrides: Any) -> str:
    """Scenario fingerprint of a small fixed scenario; overrides change it."""
    scenario = {"schema": 1, "task": "t1", "policy": "p1", "allowlist": ["write_file"], **overrides}
    return digest(DigestKind.SCENARIO, scenario)


def make_state(
    *,
    run_id: str | None = None,
    task_id: str = "task-1",
    task_version: str = "1",
    policy_version: str = "1",
    instance_id: str = "env-1",
    env_version: str = "v0",
    scenario: str | None = None,
    **fields: Any,
) -> RunState:
    """A valid running ``RunState``; keyword ``fields`` override top-level fields."""
    run_id = run_id or uuid.uuid4().hex
    state = RunState(
        identity=RunIdentity(
            run_id=run_id,
            tenant_id="tenant-1",
            task_id=task_id,
            task_version=task_version,
            policy_id="policy-1",
            policy_version=policy_version,
            scenario_fingerprint=scenario or scenario_fingerprint(),
        ),
        versions=VersionSet(model="none", prompt="none", rules="r1", tool_schema="ts1"),
        phase=Phase.RUNNING,
        limits=BudgetLimits(proposals=100, steps=100, wall_seconds=3600.0, cost_micros=0),
        environment=EnvironmentRef(
            adapter_kind="workspace",
            instance_id=instance_id,
            version=env_version,
            state_fingerprint=digest(DigestKind.ENVIRONMENT, {"v": env_version}),
        ),
        scope=Scope(
            allowed_actions=["write_file"],
            allowed_paths=["**"],
            principal="agent@tenant-1",
            policy_version=policy_version,
        ),
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    for name, value in fields.items():
        setattr(state, name, value)
    return state


def write_scripted_task(directory: Path, *, steps: list[dict[str, Any]], approval_risks: tuple[str, ...] = (),
                        allowed_actions: tuple[str, ...] = ("write_file", "delete_file"),
                        verifier: str = "always", name: str = "task.toml") -> Path:
    """Write a scripted workspace task spec into ``directory`` (its workspace is ``directory/ws``).

    ``steps`` are ``[[planner.steps]]`` tables: ``{"target": ..., "content": ...}`` or
    ``{"target": ..., "delete": True}``, optionally with ``"risk"``.
    """
    directory = Path(directory)
    (directory / "ws").mkdir(parents=True, exist_ok=True)
    text = toml_dumps({
        "task": {"id": "story", "version": "1"},
        "policy": {"id": "story-policy", "version": "1", "allowed_actions": list(allowed_actions),
                   "allowed_paths": ["**"], "approval_risks": list(approval_risks),
                   "budgets": {"proposals": 50, "steps": 50, "wall_seconds": 600, "cost_micros": 0}},
        "environment": {"adapter": "workspace", "target": "ws"},
        "planner": {"kind": "scripted", **({"steps": list(steps)} if steps else {})},
        "verifier": {"kind": verifier},
    })
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path
