"""A worker process that tries to mint an approval or a reviewer decision with every key it holds.

Usage: ``python tests/evidence/forger.py approval|decision --run-id R [--case-id C]``. It is
configured the way a worker is deployed (DESIGN.md section 4.1): the checkpoint HMAC key and the
*public* keys of the approval and reviewer roots, no private key of either. It prints one JSON
object per line: what each attempt raised, and (``decision``) the forged decision it made.

``approval``: asks the approval service (``approval_grant``) and the signer lookup, then forges
evidence with every key it can put its hands on (the checkpoint key's bytes as a seed, a fresh key
under the real key id) and, since it holds the checkpoint key and can take the lease, commits the
forged approval into the run's next checkpoint as ``approval.granted``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.project.settings")

import django  # noqa: E402

django.setup()

from runtime.checkpoints.session import run_session, session_commit  # noqa: E402
from runtime.core.checkpoint import DecisionKind  # noqa: E402
from runtime.core.evidence import approval_sign, decision_sign  # noqa: E402
from runtime.core.signing import Keyring, SecretKey, TrustRoot, parse_keyring_spec  # noqa: E402
from runtime.core.statemachine import Event, transition  # noqa: E402
from runtime.decisions.approvals import approval_grant, approvals_waiting  # noqa: E402
from runtime.decisions.reviews import decision_prepare, decision_sign_for  # noqa: E402
from runtime.errors import RatchetError  # noqa: E402
from runtime.keys import keyring_for, signer_for  # noqa: E402


def emit(**fields: object) -> None:
    print(json.dumps(fields, default=str), flush=True)


def attempt(name: str, call) -> None:  # type: ignore[no-untyped-def]
    try:
        call()
    except RatchetError as exc:
        emit(attempt=name, outcome="refused", error=type(exc).__name__)
    else:
        emit(attempt=name, outcome="succeeded")


def forging_keyrings(root: TrustRoot) -> list[Keyring]:
    """Every private keyring this worker can build under the root's real key id."""
    key_id = keyring_for(root).current_key_id
    checkpoint_bytes = parse_keyring_spec("checkpoint", os.environ["RATCHET_CHECKPOINT_KEYS"])
    reused = SecretKey(checkpoint_bytes._keys[checkpoint_bytes.current_key_id]._material)  # noqa: SLF001
    return [Keyring(root, {key_id: reused}, key_id), Keyring(root, {key_id: SecretKey.generate()}, key_id)]


def forge_approval(run_id: str) -> None:
    [item] = approvals_waiting(run_ids=[run_id])
    attempt("approval_grant", lambda: approval_grant(
        run_id=run_id, approver="mallory", environment_fingerprint=item.environment_fingerprint))
    attempt("signer_for", lambda: signer_for(TrustRoot.APPROVAL))
    with run_session(run_id=run_id, worker="mallory-worker") as ctx:
        pending = ctx.state.pending
        obs = ctx.adapter.observe()
        forged = [approval_sign(keyring=ring, run_id=run_id, idempotency_key=pending.idempotency_key,
                                intent_digest=pending.intent_digest, environment_instance_id=obs.instance_id,
                                environment_fingerprint=obs.state_fingerprint, environment_version=obs.version,
                                approver="mallory", ttl_seconds=3600)
                  for ring in forging_keyrings(TrustRoot.APPROVAL)]
        for index, other in enumerate(forged):
            emit(attempt=f"forged_approval_{index}", approval=other.model_dump(mode="json"))
        evidence = forged[0]
        pending.approval = evidence
        ctx.state.phase = transition(ctx.state.phase, Event.APPROVED)
        ctx.state.stop_reason = None
        ctx.state.stop_detail = ""
        session_commit(ctx, ("approval.granted", {"approver": "mallory",
                                                  "approval": evidence.model_dump(mode="json"),
                                                  "sealed": None, "idempotency_key": pending.idempotency_key}))
    emit(attempt="commit_forged_approval", outcome="committed", approval_id=evidence.approval_id)


def forge_decision(case_id: str) -> None:
    attempt("decision_sign_for", lambda: decision_sign_for(case_id=case_id, reviewer="mallory", decision="replan"))
    attempt("signer_for", lambda: signer_for(TrustRoot.REVIEWER))
    binding = {**decision_prepare(case_id=case_id), "reviewer": "rita", "decision": DecisionKind.REPLAN}
    for index, ring in enumerate(forging_keyrings(TrustRoot.REVIEWER)):
        emit(attempt=f"forged_decision_{index}", decision=decision_sign(keyring=ring, binding=binding)
             .model_dump(mode="json"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["approval", "decision"])
    parser.add_argument("--run-id", default="")
    parser.add_argument("--case-id", default="")
    args = parser.parse_args()
    if args.what == "approval":
        forge_approval(args.run_id)
    else:
        forge_decision(args.case_id)


if __name__ == "__main__":
    main()
