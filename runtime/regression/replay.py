"""Regression fixtures: replay the five recorded runs against a combination (DESIGN.md section 8.5).

``runtime/regression/fixtures/<name>.json`` each hold one run, recorded from a real run: ``input``
(task spec text, the source history it needs, the scenario of engine calls and injected faults),
``output`` (final phase, stop reason, writes, verdicts, what is left pending, review cases),
``tool_trace`` (the trace event by event, fields that do not depend on the run id, the clock or a
random instance id; keys become ``key#<cursor>``) and ``side_effects`` (the environment's own
record of every write). The five groups: ``normal``, ``rejected``, ``timed_out``, ``cancelled``,
``duplicate_request``.

:func:`regress_run` replays each in this process (real runs in the configured database, under
the fixtures' own ``regression-*`` / ``engine-replay`` tasks), compares the three records, and
stores a :class:`~runtime.models.RegressRecord` for the combination, which a promotion requires
(``runtime.rollout.combinations``). It refuses a combination whose code is not this process's code.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.core.idempotency import derive_key
from runtime.core.ledger import state_ledger
from runtime.decisions.cancellation import run_request_cancel
from runtime.engine import run_advance, run_start
from runtime.errors import CombinationStateError, ConfigurationError
from runtime.evidence.attachments import attachment_get
from runtime.models import Run, TraceEvent
from runtime.regression.record import regress_restore, regress_side_effects, run_adapter_open, trace_entry
from runtime.regression.sources import hanging_git, small_history_build
from runtime.rollout.combinations import combination_get, combination_regress_record
from runtime.taskspec.plugin_pins import plugin_code_digest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GROUPS = ("normal", "rejected", "timed_out", "cancelled", "duplicate_request")
COMPARED = ("output", "tool_trace", "side_effects")


class KeyNames:
    """Replaces a run's idempotency keys by ``key#<cursor>`` (keys embed the random run id)."""

    def __init__(self, run_id: str) -> None:
        self.names = {derive_key(run_id=run_id, cursor=c, replan_epoch=e): f"key#{c}" + (f"@{e}" if e else "")
                      for c in range(64) for e in range(3)}

    def __call__(self, key: Any) -> Any:
        return self.names.get(key, key if key is None else "key#?")


def regress_fixture_load(name: str) -> dict[str, Any]:
    """The recorded fixture ``name`` (one of :data:`GROUPS`).

    Raises:
        ConfigurationError: the file is missing or not JSON.
    """
    try:
        return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"regression fixture {name!r} cannot be read: {exc}") from None


def _deliver_pending_again(run_id: str, times: int) -> None:
    pending = regress_restore(run_id).state.pending
    adapter = run_adapter_open(run_id)
    for _ in range(times):
        adapter.execute(pending.action, idempotency_key=pending.idempotency_key,
                        intent_digest=pending.intent_digest,
                        fencing_token=Run.objects.get(run_id=run_id).lease_version,
                        blobs=lambda d: attachment_get(digest=d))


def regress_play(given: Mapping[str, Any], directory: Path) -> str:
    """Play a fixture's ``input`` in ``directory`` (an empty directory); returns the run id.

    Raises:
        ConfigurationError: an unknown scenario step or source; engine errors propagate.
    """
    if given["source"] == "small-history":
        small_history_build(directory / "source")
    elif given["source"] is not None:
        raise ConfigurationError(f"unknown regression source {given['source']!r}")
    (directory / "workspace").mkdir()
    task = directory / "task.toml"
    task.write_text(given["task"], encoding="utf-8")
    run_id = ""
    with ExitStack() as faults:
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
                faults.enter_context(hanging_git(directory / "bin", limit=step["times"],
                                                 after_update=step["after_update"],
                                                 timeout_seconds=step["timeout_seconds"]))
            else:
                raise ConfigurationError(f"unknown regression scenario step {kind!r}")
    return run_id


def regress_observe(run_id: str) -> dict[str, Any]:
    """``{"output", "tool_trace", "side_effects"}`` of a played run, as the fixtures record them."""
    name = KeyNames(run_id)
    state = regress_restore(run_id).state
    executed = state_ledger(state).executed_writes()
    output = {
        "phase": state.phase.value,
        "stop_reason": state.stop_reason.value if state.stop_reason else None,
        "writes": len(executed),
        "executed": [{"idempotency_key": name(w.idempotency_key), "cursor": w.cursor,
                      "reconciled": w.reconciled, "result_summary": w.result_summary} for w in executed],
        "verifier": [r.passed for r in state.verifier_results],
        "pending": None if state.pending is None else {
            "idempotency_key": name(state.pending.idempotency_key),
            "cursor": state.pending.cursor, "intent_digest": state.pending.intent_digest},
        "review_cases": [c.reason.value for c in state.review_cases],
    }
    events = TraceEvent.objects.filter(run_id=run_id).order_by("seq")
    trace = [trace_entry(e.event_type, e.payload, name) for e in events]
    return {"output": output, "tool_trace": trace, "side_effects": regress_side_effects(run_id, name)}


@dataclass(frozen=True)
class RegressResult:
    """One fixture's replay: which of output / tool_trace / side_effects differ (empty: passed)."""

    name: str
    run_id: str
    mismatches: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.mismatches


def regress_check_code(*, combination_id: str) -> None:
    """Refuse to regress a combination whose plug-in code is not this process's code.

    Raises:
        CombinationNotFoundError; CombinationStateError: a pinned plug-in's code digest differs
            from the code this process would run (DESIGN.md section 8.5).
    """
    combo = combination_get(combination_id=combination_id)
    for role, pin in sorted(dict(combo.fields.get("plugins") or {}).items()):
        wanted = pin.get("code_digest")
        if wanted and plugin_code_digest(str(pin.get("entry"))) != wanted:
            raise CombinationStateError(f"this process runs other {role} code than the combination pins; "
                                        "run regress on a worker of the combination",
                                        combination_id=combo.combination_id)


def regress_run(*, combination_id: str, groups: tuple[str, ...] = GROUPS) -> list[RegressResult]:
    """Replay every fixture group, compare, and record the result for the combination.

    Returns:
        One :class:`RegressResult` per group, in order; the stored record passes only if all do.

    Raises:
        CombinationNotFoundError / CombinationStateError: see :func:`regress_check_code`.
        ConfigurationError: a fixture cannot be read or played.
    """
    regress_check_code(combination_id=combination_id)
    results = []
    for name in groups:
        recorded = regress_fixture_load(name)
        with tempfile.TemporaryDirectory(prefix=f"ratchet-regress-{name}-") as scratch:
            run_id = regress_play(recorded["input"], Path(scratch))
            actual = regress_observe(run_id)
        results.append(RegressResult(name=name, run_id=run_id,
                                     mismatches=tuple(p for p in COMPARED if actual[p] != recorded[p])))
    combination_regress_record(combination_id=combination_id, passed=all(r.passed for r in results),
                               results=[{"name": r.name, "run_id": r.run_id, "mismatches": list(r.mismatches)}
                                        for r in results])
    return results
