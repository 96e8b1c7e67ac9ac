"""Runtime invariants hold under ``python -O`` (DESIGN.md section 7: "`assert` guarding runtime
invariants (gone under `python -O`)").

Story: production runs with ``-O``, which deletes every ``assert``. A child interpreter started
with ``-O`` breaks one invariant after another and must get the same typed errors as the test
process; and no production module relies on ``assert`` in the first place.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys
from datetime import datetime
from runtime.core.canonical import DigestKind, digest, canonical_json
from runtime.core.checkpoint import Phase, StopReason
from runtime.core.envelope import seal, open_envelope
from runtime.core.invariants import validate_state
from runtime.core.ledger import state_ledger
from runtime.core.signing import Keyring, SecretKey, Signature
from runtime.core.statemachine import Event, transition
from runtime.errors import RatchetError
from tests.core import builders as b
from tests.factories import make_keyring, make_state

def pending_without_action():
    validate_state(make_state(phase=Phase.PENDING))

def running_with_pending():
    s = make_state(); s.pending = b.pending_for(s); validate_state(s)

def over_budget():
    s = make_state(); s.usage.steps = s.limits.steps + 1; validate_state(s)

def completed_without_verifier():
    validate_state(make_state(phase=Phase.COMPLETED, stop_reason=StopReason.VERIFIED))

def duplicate_executed_key():
    s = make_state(); ledger = state_ledger(s)
    ledger.record_executed(b.executed_for("k")); ledger.record_executed(b.executed_for("k", cursor=1))

def conflict_without_pending():
    s = make_state(); p = b.pending_for(s)
    s.review_cases.append(b.conflict_case_for(s, p)); s.phase = Phase.NEEDS_REVIEW
    s.stop_reason = StopReason.RECEIPT_CONFLICT; validate_state(s)

def unserialisable_value():
    s = make_state(); s.planner_state["x"] = {1, 2}; seal(s, generation=1, keyring=make_keyring())

def generation_zero():
    seal(make_state(), generation=0, keyring=make_keyring())

def wrong_root():
    seal(make_state(), generation=1, keyring=make_keyring("approval"))

def bad_mac():
    k = make_keyring(); k.verify(b"m", Signature(key_id="k1", mac="0" * 64))

def unknown_key():
    make_keyring().verify(b"m", Signature(key_id="nope", mac="0" * 64))

def forged_checkpoint():
    k = make_keyring(); raw, _ = seal(make_state(), generation=1, keyring=k)
    open_envelope(raw.replace(b'"cursor":0', b'"cursor":1'), keyring=k)

def illegal_transition():
    transition(Phase.COMPLETED, Event.PROPOSE_WRITE)

def short_key():
    SecretKey(b"short")

def bad_digest_kind():
    digest("nope", {})

def nan_value():
    canonical_json(float("nan"))

out = {"debug": __debug__, "errors": {}}
for name, fn in list(globals().items()):
    if callable(fn) and getattr(fn, "__module__", None) == "__main__" and not name.startswith("_"):
        try:
            fn()
        except RatchetError as exc:
            out["errors"][name] = type(exc).__name__
        except Exception as exc:
            out["errors"][name] = "UNTYPED " + type(exc).__name__
        else:
            out["errors"][name] = "NOTHING RAISED"
print(json.dumps(out))
"""

EXPECTED = {
    "pending_without_action": "CheckpointInvariantError",
    "running_with_pending": "CheckpointInvariantError",
    "over_budget": "CheckpointInvariantError",
    "completed_without_verifier": "CheckpointInvariantError",
    "duplicate_executed_key": "LedgerEntryError",
    "conflict_without_pending": "CheckpointInvariantError",
    "unserialisable_value": "CanonicalizationError",
    "generation_zero": "CheckpointSchemaError",
    "wrong_root": "WrongTrustRootError",
    "bad_mac": "BadSignatureError",
    "unknown_key": "UnknownKeyError",
    "forged_checkpoint": "BadSignatureError",
    "illegal_transition": "IllegalTransitionError",
    "short_key": "KeyringError",
    "bad_digest_kind": "UnknownDigestKindError",
    "nan_value": "CanonicalizationError",
}


def _run_child(*flags: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, *flags, "-c", CHILD], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_it_raises_typed_errors_for_broken_invariants_under_python_O():
    result = _run_child("-O")
    assert result["debug"] is False  # really running with asserts stripped
    assert result["errors"] == EXPECTED


def test_it_raises_the_same_errors_without_O():
    result = _run_child()
    assert result["debug"] is True
    assert result["errors"] == EXPECTED


def test_it_finds_no_assert_statement_in_production_code():
    """No ``assert`` anywhere in the shipped packages (tests may use them; production may not)."""
    offenders = []
    for package in ("runtime", "review"):
        root = REPO / package
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            offenders += [
                f"{path.relative_to(REPO)}:{node.lineno}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Assert)
            ]
    assert (REPO / "runtime" / "core" / "checkpoint.py").is_file()
    assert offenders == []
