"""Builds schema-v1 checkpoint envelopes, the old format the v1 -> v2 migrator reads.

v1 is v2 except that ``limits``/``usage`` carry ``cost_usd`` (float dollars) instead of
``cost_micros``, and there is no ``replan_epoch`` (on the run or its pending action) and no
``quarantined_keys``. The body is written out literally, not derived from today's models, so
the fixture stays a faithful old checkpoint however the v2 code changes.

The committed fixture ``tests/fixtures/checkpoint_v1.json`` is exactly :func:`build_v1_envelope`
with the throwaway test key in ``tests/fixtures/checkpoint_v1.key.json``
(``test_migrations.py`` checks this). To rebuild it after a deliberate change::

    .venv/bin/python -c "from tests.core.v1_checkpoints import write_v1_fixture; write_v1_fixture()"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.core.canonical import DigestKind, canonical_json, digest, digest_bytes
from runtime.core.signing import Keyring, SecretKey, TrustRoot

FIXTURES_DIR = Path(__file__).resolve().parent.parent / "fixtures"
V1_FIXTURE = FIXTURES_DIR / "checkpoint_v1.json"
V1_KEY_FILE = FIXTURES_DIR / "checkpoint_v1.key.json"

RUN_ID = "run-v1-fixture"
ENV_INSTANCE = "workspace-v1-fixture"


def fixture_keyring() -> Keyring:
    """The checkpoint keyring holding only the committed throwaway test key."""
    data = json.loads(V1_KEY_FILE.read_text())
    key_id = data["key_id"]
    return Keyring(TrustRoot.CHECKPOINT, {key_id: SecretKey.from_b64(data["key_b64"])}, key_id)


def _environment(version: str) -> dict[str, Any]:
    return {
        "adapter_kind": "workspace",
        "instance_id": ENV_INSTANCE,
        "version": version,
        "state_fingerprint": digest(DigestKind.ENVIRONMENT, {"files": {"notes/todo.md": version}}),
        "adapter_generation": 1,
        "observation_version": 2,
        "attachments": [],
    }


def v1_body(*, limits_cost_usd: Any = 0.25, usage_cost_usd: Any = 0.1) -> dict[str, Any]:
    """A complete, valid v1 envelope body (everything except ``mac``).

    The run is mid-write: one write executed (with its full receipt), a second one pending.
    """
    done_action = {
        "kind": "write_file",
        "target": "notes/todo.md",
        "params": {"content_digest": digest_bytes(b"- buy milk\n")},
        "risk": "low",
    }
    receipt = {
        "namespace": "workspace",
        "adapter_version": "1",
        "receipt_id": "rcpt-0001",
        "idempotency_key": "ik-run-v1-fixture-0",
        "intent_digest": digest(DigestKind.INTENT, done_action),
        "result": {"bytes_written": 11},
        "environment_version_after": "e1",
        "fencing_token": 1,
        "committed_at": "2025-06-01T11:58:30Z",
        "approval_digest": None,
        "business_object": "notes/todo.md",
    }
    next_action = {
        "kind": "write_file",
        "target": "notes/todo.md",
        "params": {"content_digest": digest_bytes(b"- buy milk\n- call bob\n")},
        "risk": "low",
    }
    return {
        "schema_version": 1,
        "run_id": RUN_ID,
        "tenant_id": "tenant-fixture",
        "task_id": "task-fixture",
        "environment_instance_id": ENV_INSTANCE,
        "generation": 3,
        "created_at": "2025-06-01T12:00:00Z",
        "key_id": json.loads(V1_KEY_FILE.read_text())["key_id"],
        "payload": {
            "identity": {
                "run_id": RUN_ID,
                "tenant_id": "tenant-fixture",
                "task_id": "task-fixture",
                "task_version": "1",
                "policy_id": "policy-fixture",
                "policy_version": "3",
                "scenario_fingerprint": digest(DigestKind.SCENARIO, {"task": "task-fixture"}),
            },
            "versions": {
                "model": "scripted",
                "prompt": "none",
                "rules": "r1",
                "tool_schema": "ts1",
                "inputs": {"repo": "0123abc"},
            },
            "phase": "pending",
            "stop_reason": None,
            "stop_detail": "",
            "cursor": 1,
            "limits": {
                "proposals": 10,
                "steps": 10,
                "wall_seconds": 600.0,
                "cost_usd": limits_cost_usd,
            },
            "usage": {"proposals": 2, "steps": 1, "wall_seconds": 12.5, "cost_usd": usage_cost_usd},
            "environment": _environment("e1"),
            "pending": {
                "action": next_action,
                "intent_digest": digest(DigestKind.INTENT, next_action),
                "idempotency_key": "ik-run-v1-fixture-1",
                "cursor": 1,
                "pre_state": _environment("e1"),
                "expected_post_fingerprint": digest(
                    DigestKind.ENVIRONMENT, {"files": {"notes/todo.md": "e2"}}
                ),
                "requires_approval": False,
                "approval": None,
                "sealed_approvals": [],
                "proposed_at": "2025-06-01T11:59:00Z",
                "attempts": 0,
            },
            "executed": [
                {
                    "idempotency_key": "ik-run-v1-fixture-0",
                    "intent_digest": receipt["intent_digest"],
                    "cursor": 0,
                    "receipt": receipt,
                    "receipt_fingerprint": digest(DigestKind.RECEIPT, receipt),
                    "result_summary": "write_file notes/todo.md",
                    "reconciled": False,
                }
            ],
            "scope": {
                "allowed_actions": ["write_file"],
                "allowed_paths": ["notes/**"],
                "permissions": ["workspace:write"],
                "approval_risks": ["high"],
                "principal": "agent@tenant-fixture",
                "policy_version": "3",
                "preconditions": [{"kind": "environment_instance", "expected": ENV_INSTANCE}],
            },
            "verifier_results": [],
            "review_cases": [],
            "consumed_nonces": [],
            "planner_state": {"script_position": 1},
            "started_at": "2025-06-01T11:50:00Z",
        },
    }


def sign_body(body: dict[str, Any], keyring: Keyring) -> bytes:
    """Sign an envelope body the way every schema version is signed: canonical JSON minus mac."""
    signature = keyring.sign(canonical_json(body))
    return canonical_json({**body, "mac": signature.mac})


def build_v1_envelope(keyring: Keyring | None = None, **body_overrides: Any) -> bytes:
    """Signed v1 envelope bytes; ``body_overrides`` go to :func:`v1_body`."""
    return sign_body(v1_body(**body_overrides), keyring or fixture_keyring())


def write_v1_fixture() -> Path:
    """(Re)write ``tests/fixtures/checkpoint_v1.json`` from :func:`build_v1_envelope`."""
    envelope = json.loads(build_v1_envelope())
    V1_FIXTURE.write_text(json.dumps(envelope, indent=2, sort_keys=True) + "\n")
    return V1_FIXTURE
