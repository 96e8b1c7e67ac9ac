"""Completing a run: the verifier decides, and the adapter's records are audited for duplicates.

When the planner says done, the task's verifier checks the environment (DESIGN.md section 8)
and the run ends ``completed`` or ``failed``; either way the final checkpoint carries an audit,
from the adapter's own records, of how many effects each of the run's keys has. A verifier's
output (a command's, section 6.5) is stored as an attachment with that checkpoint, and the
environment is observed again afterwards: a verdict about a version the verifier itself changed
binds to nothing, so the run freezes for review instead.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runtime.adapters.base import Observation
from runtime.checkpoints.session import RunSession, observation_json, observation_matches, session_commit
from runtime.core.checkpoint import StopReason, VerifierResult
from runtime.core.crashpoints import crash_point, register
from runtime.core.ledger import state_ledger
from runtime.core.statemachine import Event, transition
from runtime.engine.freeze import run_freeze
from runtime.evidence.attachments import attachment_put
from runtime.planners.base import Done
from runtime.verifiers.builtin import verify

CP_BEFORE_VERIFY = register("engine.before_verify", "planner said done, verifier not run yet")


def run_complete(session: RunSession, obs: Observation, done: Done) -> None:
    """Run the verifier on ``obs`` and end the run ``completed`` or ``failed``.

    Args:
        obs: the environment as observed when the planner said ``done``.
        done: the planner's answer (its reason lands in the trace).

    Raises:
        VerifierError: the verifier could not run.
        PluginError: the verifier raised, or gave no verdict (``VerifierCommandError``); the
            caller freezes the run (its output, if any, is stored with that commit).
        LeaseLostError / StaleGenerationError: from the commit; another worker took over.
    """
    state = session.state
    crash_point(CP_BEFORE_VERIFY)
    outcome = verify(session.spec, obs, session.target, planner_state=state.planner_state,
                     base_dir=session.base_dir,
                     put_blob=lambda data: attachment_put(data=data, content_type="text/plain; charset=utf-8",
                                                          row_writes=session.within_commit))
    after = session.adapter.observe()
    if after.instance_id != obs.instance_id or not observation_matches(after, state.environment):
        run_freeze(session, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                   f"the environment changed while the verifier ran (version {obs.version} -> {after.version}); "
                   f"its verdict ({'pass' if outcome.passed else 'fail'}) binds to neither: {outcome.detail}",
                   extra={"observed": observation_json(after), "output_digest": outcome.output_digest})
        return
    state.verifier_results.append(VerifierResult(
        environment_version=obs.version, environment_fingerprint=obs.state_fingerprint,
        passed=outcome.passed, detail=outcome.detail[:4000], at=datetime.now(UTC),
    ))
    audit = _audit_effects(session)
    event_payload = {"passed": outcome.passed, "detail": outcome.detail, "environment_version": obs.version,
                     "environment_fingerprint": obs.state_fingerprint, "planner": done.reason}
    if outcome.output_digest is not None:
        event_payload["output_digest"] = outcome.output_digest
    if outcome.passed:
        state.phase = transition(state.phase, Event.VERIFIED)
        state.stop_reason = StopReason.VERIFIED
        state.stop_detail = outcome.detail[:4000]
        session_commit(session, ("verifier.passed", event_payload), ("audit.effects", audit),
                       ("run.completed", {"environment_version": obs.version}))
    else:
        state.phase = transition(state.phase, Event.VERIFIER_FAILED)
        state.stop_reason = StopReason.VERIFIER_FAILED
        state.stop_detail = outcome.detail[:4000]
        session_commit(session, ("verifier.failed", event_payload), ("audit.effects", audit),
                       ("run.failed", {"environment_version": obs.version}))


def _audit_effects(session: RunSession) -> dict[str, Any]:
    """Count, from the adapter's own records, how many effects each of this run's keys has."""
    counts: dict[str, int] = {}
    for receipt in session.adapter.receipts():
        counts[receipt.idempotency_key] = counts.get(receipt.idempotency_key, 0) + 1
    keys = [w.idempotency_key for w in state_ledger(session.state).executed_writes()]
    duplicates = sum(max(0, counts.get(k, 0) - 1) for k in keys)
    missing = [k for k in keys if counts.get(k, 0) == 0]
    return {"keys": len(keys), "duplicates": duplicates, "missing": missing}
