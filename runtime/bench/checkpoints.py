"""Checkpoint commit, seal and restore at several ledger sizes (DESIGN.md sections 3, 3.1 and 4).

For each level ``N`` of :attr:`BenchSizes.write_levels` a run is created whose receipts ledger
holds ``N`` executed git writes (recorded in batches, as the engine would one at a time), and
whose state has the next write pending. Then, against the same floor:

* **commit**: ``checkpoint_commit`` of that state with one ``write.executed`` event, the
  engine's commonest commit; the first three are warm-ups;
* **seal**: validate + canonical JSON + HMAC alone, to split a commit into signing and database;
* **restore**: ``checkpoint_restore`` (verify + load) of the committed checkpoint;
* the **counts** of one commit and one restore (statements, round trips, durable transactions,
  on both databases), and of one workspace write action end to end with its client fsyncs
  (:mod:`runtime.bench.write_counts`).

The levels are measured interleaved (one commit and one restore of each level per round, each
right after one sample of each floor, :mod:`runtime.bench.floor`), so every level and both
floors see the same machine load. Each level's advance is reported against both floors: the
one-statement floor (one durable commit on the main database) and the two-store floor (one on
the main database, then one on the mark's: the least an advance can cost, DESIGN.md section 4.3).

The goal is that commit and restore do not grow with ``N`` (the ledger keeps the checkpoint
the same size however long the run, DESIGN.md section 3.1): the 3,000-write ones within
1.2x of the 0-write ones (:mod:`runtime.bench.targets`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.bench.counting import DatabaseCounter, DatabaseCounts, count_of
from runtime.bench.floor import floor_sample, two_store_floor_sample
from runtime.bench.report import BenchReport, Ratio, latency_metric
from runtime.bench.sizes import BenchSizes
from runtime.bench.state import realistic_state, realistic_write
from runtime.bench.write_counts import workspace_write_counts
from runtime.checkpoints.protocol import checkpoint_commit, checkpoint_restore, run_create
from runtime.core.checkpoint import RunState
from runtime.core.envelope import seal
from runtime.core.ledger import state_ledger
from runtime.core.signing import TrustRoot
from runtime.errors import BenchmarkError
from runtime.keys import keyring_for
from runtime.ownership.leases import Lease

LEDGER_BATCH = 250
"""Executed writes recorded per setup commit (setup only; never timed)."""


def _restore(state: RunState):  # noqa: ANN202 - runtime.checkpoints.checks.Restored
    ident = state.identity
    return checkpoint_restore(run_id=ident.run_id, scenario_fingerprint=ident.scenario_fingerprint,
                              task_version=ident.task_version, policy_version=ident.policy_version,
                              versions=state.versions)


def _run_with_ledger(writes: int) -> tuple[RunState, Lease, int]:
    """A run whose ledger holds ``writes`` executed writes; returns its restored state, the
    lease and the committed generation."""
    state = realistic_state(executed=writes)
    created = run_create(state=state, worker="bench-checkpoint", ttl_seconds=3600.0,
                         spec={"bench": "checkpoint"}, events=[("run.started", {"bench": True})])
    lease, generation = created.lease, created.generation
    run_id = state.identity.run_id
    for start in range(0, writes, LEDGER_BATCH):
        restored = _restore(state)
        state = restored.state
        ledger = state_ledger(state)
        for cursor in range(start, min(writes, start + LEDGER_BATCH)):
            ledger.record_executed(realistic_write(run_id=run_id, cursor=cursor))
        result = checkpoint_commit(lease=lease, state=state, expected_generation=generation)
        lease, generation = result.lease, result.generation
    restored = _restore(state)
    if restored.state.ledger.length != writes:
        raise BenchmarkError("the ledger does not hold the writes recorded in it",
                             run_id=run_id, length=restored.state.ledger.length, writes=writes)
    return restored.state, lease, generation


@dataclass
class _Level:
    """One ledger size under measurement: its run, and the samples taken so far."""

    writes: int
    samples: int
    state: RunState
    lease: Lease
    generation: int
    event: tuple[str, dict[str, Any]]
    commits: list[float] = field(default_factory=list)
    commit_counts: list[DatabaseCounts] = field(default_factory=list)
    restores: list[float] = field(default_factory=list)
    restore_counts: list[DatabaseCounts] = field(default_factory=list)
    floors: list[float] = field(default_factory=list)
    two_store_floors: list[float] = field(default_factory=list)
    taken: int = 0


def _level_prepare(*, writes: int, samples: int) -> _Level:
    state, lease, generation = _run_with_ledger(writes)
    last = realistic_write(run_id=state.identity.run_id, cursor=max(writes - 1, 0))
    # One event per commit, as the engine's write.executed carries: the key, and the receipt
    # named by its id, adapter and fingerprint (the ledger holds it: DESIGN.md section 4.14).
    event = ("write.executed", {"idempotency_key": last.idempotency_key,
                                "intent_digest": last.intent_digest,
                                "receipt_id": last.receipt.receipt_id,
                                "adapter_version": last.receipt.adapter_version,
                                "receipt_fingerprint": last.receipt_fingerprint})
    return _Level(writes=writes, samples=samples, state=state, lease=lease,
                  generation=generation, event=event)


def _level_sample(level: _Level, counter: DatabaseCounter) -> None:
    """One floor, one commit and one restore of ``level``; the first three are warm-ups."""
    warm = level.taken < 3
    floor = floor_sample()
    two_store = two_store_floor_sample()
    before = counter.snapshot()
    started = time.perf_counter()
    result = checkpoint_commit(lease=level.lease, state=level.state,
                               expected_generation=level.generation, events=[level.event])
    elapsed = time.perf_counter() - started
    commit_counts = counter.snapshot().minus(before)
    level.lease, level.generation = result.lease, result.generation
    before = counter.snapshot()
    started = time.perf_counter()
    restored = _restore(level.state)
    restore_elapsed = time.perf_counter() - started
    restore_counts = counter.snapshot().minus(before)
    if restored.generation != level.generation:
        raise BenchmarkError("restore returned another generation than the last commit",
                             run_id=level.state.identity.run_id, generation=restored.generation)
    level.taken += 1
    if not warm:
        level.floors.append(floor)
        level.two_store_floors.append(two_store)
        level.commits.append(elapsed)
        level.commit_counts.append(commit_counts)
        level.restores.append(restore_elapsed)
        level.restore_counts.append(restore_counts)


def _level_report(*, report: BenchReport, level: _Level, floor_ms: float) -> None:
    writes, samples = level.writes, level.samples
    keyring = keyring_for(TrustRoot.CHECKPOINT)
    seals: list[float] = []
    raw = b""
    for _ in range(samples):
        started = time.perf_counter()
        raw, _envelope = seal(level.state, generation=level.generation + 1, keyring=keyring)
        seals.append(time.perf_counter() - started)
    commit = latency_metric(f"checkpoint_commit_ms_at_{writes}",
                            f"checkpoint commit, {writes} executed writes in the ledger",
                            level.commits, floor_ms=floor_ms)
    sealed = latency_metric(f"checkpoint_seal_ms_at_{writes}",
                            f"  of which seal alone (validate + sign), {writes} writes", seals,
                            floor_ms=floor_ms)
    report.metrics += [
        commit, sealed,
        latency_metric(f"checkpoint_restore_ms_at_{writes}",
                       f"checkpoint restore (verify + load), {writes} writes", level.restores,
                       floor_ms=floor_ms),
    ]
    report.counts += [
        count_of(f"per_checkpoint_advance_at_{writes}",
                 f"one checkpoint advance (commit), {writes} writes in the ledger",
                 level.commit_counts),
        count_of(f"per_checkpoint_restore_at_{writes}",
                 f"one checkpoint restore, {writes} writes in the ledger", level.restore_counts),
    ]
    share = sealed.median / commit.median
    report.ratios.append(Ratio(
        name=f"seal_share_of_commit_at_{writes}",
        label=f"seal / checkpoint commit, {writes} writes", value=share,
        note=(f"{share:.0%} validate + sign, {1 - share:.0%} database "
              "(fence, append, HWM CAS, ledger, trace)"),
    ))
    report.facts[f"checkpoint_envelope_bytes_at_{writes}"] = len(raw)
    # The floor sampled right before each of this level's commits (same moments, same load): on
    # a shared machine whose load drifts this is the fairer divisor; the tables use the
    # section-independent floor above.
    interleaved = statistics.median(level.floors) * 1000.0
    report.facts[f"checkpoint_floor_interleaved_ms_at_{writes}"] = round(interleaved, 4)
    report.facts[f"checkpoint_commit_vs_interleaved_floor_at_{writes}"] = round(
        commit.median / interleaved, 2)
    report.facts[f"checkpoint_restore_vs_interleaved_floor_at_{writes}"] = round(
        statistics.median(level.restores) * 1000.0 / interleaved, 2)
    two_store = statistics.median(level.two_store_floors) * 1000.0
    report.facts[f"checkpoint_two_store_floor_interleaved_ms_at_{writes}"] = round(two_store, 4)
    report.ratios += [
        Ratio(name=f"checkpoint_advance_vs_floor_at_{writes}",
              label=f"checkpoint advance / one-statement floor, {writes} writes",
              value=commit.median / interleaved,
              note="x one 1 KiB INSERT + COMMIT on the main database (sampled in the same rounds)"),
        Ratio(name=f"checkpoint_advance_vs_two_store_floor_at_{writes}",
              label=f"checkpoint advance / two-store floor, {writes} writes",
              value=commit.median / two_store,
              note="x INSERT + COMMIT on the main database then UPDATE + COMMIT on the mark's "
                   "(same rounds): what the protocol adds to its two durable commits"),
    ]


def checkpoints_measure(*, report: BenchReport, sizes: BenchSizes, floor_ms: float,
                        work: Path) -> None:
    """Measure commit, seal and restore at every level of ``sizes.write_levels`` and append the
    latencies (with their ratio to ``floor_ms``), their ratios to both floors sampled in the same
    rounds, counts, seal shares and envelope sizes to ``report``; then the flatness ratios
    (largest level over the smallest) and the counts of one workspace write action (its
    workspace under ``work``).

    Raises:
        BenchmarkError: the ledger did not take the writes, or a restore returned another
            generation than the last commit.
    """
    levels = sorted(set(sizes.write_levels))
    prepared = [_level_prepare(writes=writes, samples=sizes.samples_at(writes))
                for writes in levels]
    # Interleaved: one sample of every level per round, so all levels see the same machine
    # (a shared machine's load drifts over a section; measured one after the other, the larger
    # level would be judged on another machine than the smaller one).
    counter = DatabaseCounter()
    with counter.installed():
        for round_ in range(max(level.samples for level in prepared) + 3):
            for level in prepared:
                if round_ < level.samples + 3:
                    _level_sample(level, counter)
    for level in prepared:
        _level_report(report=report, level=level, floor_ms=floor_ms)
    workspace_write_counts(report=report, work=work / "write-counts")
    if len(levels) > 1:
        low, high = levels[0], levels[-1]
        for what in ("commit", "restore"):
            value = (report.metric(f"checkpoint_{what}_ms_at_{high}").median
                     / report.metric(f"checkpoint_{what}_ms_at_{low}").median)
            report.ratios.append(Ratio(
                name=f"checkpoint_{what}_growth", label=f"checkpoint {what}: {high} / {low} writes",
                value=value, note="1.0 = flat: the cost does not grow with the run"))
