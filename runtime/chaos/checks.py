"""The checks after each chaos run, read from the adapter's own records and the trace (section 8.2).

* the run completed (verifier passed), not frozen;
* the final environment equals the uninterrupted run's (content fingerprint), when the run's
  target is its own;
* one effect per idempotency key, counted in the adapter's own records (``Adapter.receipts``):
  every key in them when the target is the run's own, else every key the run's trace says was
  executed or reconciled; and no such traced key without an effect;
* no generation rollback: the stored checkpoints are generations ``1..g`` without a gap, the
  high-water mark and the run row end at ``g``, and the trace's committed generations only rise
  (a commit's trace events may be lost in the split-HWM crash window, DESIGN.md section 4.3);
* completion bound to the final environment: ``run.completed`` and ``verifier.passed`` name the
  version and fingerprint the adapter shows now;
* the trace hash chain verifies.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from runtime.checkpoints.protocol import checkpoint_hwm
from runtime.checkpoints.session import adapter_for_run
from runtime.errors import RatchetError
from runtime.evidence.trace import trace_verify
from runtime.models import Checkpoint, Run, TraceEvent
from runtime.replay_check.audit import Check


@dataclass(frozen=True)
class RunChecks:
    """The checks of one run; ``duplicates``: effects beyond the first per key."""

    run_id: str
    checks: tuple[Check, ...]
    duplicates: int
    fingerprint: str | None

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def chaos_checks(*, run_id: str, baseline_fingerprint: str | None, own_target: bool) -> RunChecks:
    """Check run ``run_id`` after its drive (see the module docstring).

    Args:
        baseline_fingerprint: the uninterrupted run's final content fingerprint (None: unknown).
        own_target: the run's target is its own (else the environment comparison is skipped).
    """
    run = Run.objects.get(run_id=run_id)
    checks = [Check("run completed (verifier passed), not frozen",
                    run.phase == "completed" and run.stop_reason == "verified",
                    f"phase {run.phase} ({run.stop_reason or '-'})")]
    events = list(TraceEvent.objects.filter(run_id=run_id).order_by("seq").values_list("event_type", "payload"))
    duplicates, fingerprint = 0, None
    try:
        adapter = adapter_for_run(run)
        obs = adapter.observe()
        fingerprint = obs.state_fingerprint
        per_key = Counter(r.idempotency_key for r in adapter.receipts())
    except RatchetError as exc:
        checks.append(Check("adapter readable", False, str(exc)))
    else:
        if own_target and baseline_fingerprint is not None:
            checks.append(Check("final environment equals the uninterrupted run's",
                                fingerprint == baseline_fingerprint, f"{fingerprint} vs {baseline_fingerprint}"))
        keys = {p.get("idempotency_key") for t, p in events if t in ("write.executed", "write.reconciled")}
        keys.discard(None)
        # A target of its own holds only this run's effects: count every key in its records (a
        # crash can drop a commit's trace events, never the adapter's record of the effect).
        counted = set(per_key) | keys if own_target else keys
        duplicates = sum(per_key[k] - 1 for k in counted if per_key[k] > 1)
        missing = sorted(k for k in keys if per_key[k] == 0)
        checks.append(Check("one effect per idempotency key (adapter's own records)",
                            duplicates == 0 and not missing,
                            f"{len(counted)} keys, {duplicates} duplicate effects, {len(missing)} without an effect"))
        done = [p for t, p in events if t in ("run.completed", "verifier.passed")]
        bound = bool(done) and all(p.get("environment_version") == obs.version for p in done) and all(
            p.get("environment_fingerprint", fingerprint) == fingerprint for p in done)
        checks.append(Check("completion bound to the final environment version", bound,
                            f"now {obs.version}; completion names "
                            f"{sorted({str(p.get('environment_version')) for p in done}) or 'nothing'}"))
    # The checkpoint rows are the record of what committed; a run committed by an earlier release
    # may miss a commit's events (a crash between its mark's commit and its main one, DESIGN.md
    # section 4.3), so the trace must only never go back, not rise by one each.
    stored = set(Checkpoint.objects.filter(run_id=run_id).values_list("generation", flat=True))
    traced = [int(p.get("generation", 0)) for t, p in events if t == "checkpoint.committed"]
    rising = all(b > a for a, b in zip(traced, traced[1:], strict=False))
    try:
        hwm = checkpoint_hwm(run_id=run_id).generation
    except RatchetError as exc:
        hwm = -1
        checks.append(Check("high-water mark readable", False, str(exc)))
    last = max(stored, default=0)
    contiguous = stored == set(range(1, last + 1))
    checks.append(Check("no generation rollback",
                        rising and contiguous and hwm == run.generation == last and max(traced, default=0) <= hwm,
                        f"checkpoints 1..{last}{'' if contiguous else ' with gaps'}, HWM {hwm}, run row "
                        f"{run.generation}; trace names {len(traced)} commits "
                        f"({'rising' if rising else 'NOT rising'}, {last - len(set(traced))} lost in a crash window)"))
    chain = trace_verify(run_id=run_id)
    checks.append(Check("trace hash chain verifies", chain.ok, chain.reason or f"{chain.count} events"))
    return RunChecks(run_id=run_id, checks=tuple(checks), duplicates=duplicates, fingerprint=fingerprint)
