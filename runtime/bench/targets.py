"""The cost targets, judged on one report: each figure, its goal, met or not.

What Ratchet's guarantees may cost: a checkpoint commit within 2x a bare INSERT + COMMIT and
not growing with the run's ledger (DESIGN.md sections 3.1 and 4.3), one durable transaction per
advance and two per write action on the main database, a replay within 2x a plain ``git commit``
loop, orphaned runs completed within 30 s, and a worker's memory not growing with the run.

Only what the report measured is judged (a ``--quick`` run has smaller sizes, so its verdicts
are indicative only; the report's sizes say which run it was).
"""

from __future__ import annotations

from runtime.bench.report import BenchReport, Target


def _metric(report: BenchReport, name: str) -> float | None:
    try:
        return report.metric(name).median
    except KeyError:
        return None


def _count(report: BenchReport, name: str) -> float | None:
    return next((c.durable_transactions for c in report.counts if c.name == name), None)


def _ratio(report: BenchReport, name: str) -> float | None:
    return next((r.value for r in report.ratios if r.name == name), None)


def targets_judge(report: BenchReport) -> None:
    """Append a :class:`Target` to ``report`` for every target whose figure it holds."""
    floor = _metric(report, "floor_insert_commit_ms")
    levels = sorted(int(n.rsplit("_", 1)[1]) for n in (m.name for m in report.metrics)
                    if n.startswith("checkpoint_commit_ms_at_"))
    found: list[tuple[str, str, float | None, str, bool]] = []
    if floor and levels:
        for writes in (levels[0], levels[-1]):
            commit = _metric(report, f"checkpoint_commit_ms_at_{writes}")
            value = commit / floor if commit else None
            found.append((f"commit_vs_floor_at_{writes}",
                          f"checkpoint commit at {writes} writes / floor", value, "<= 2x",
                          value is not None and value <= 2.0))
    for what in ("commit", "restore"):
        value = _ratio(report, f"checkpoint_{what}_growth")
        found.append((f"checkpoint_{what}_flat", f"checkpoint {what}: largest / smallest ledger",
                      value, "<= 1.2x", value is not None and value <= 1.2))
    advance = _count(report, "per_engine_step")
    found.append(("durable_per_advance", "durable transactions per checkpoint advance (engine "
                  "step)", advance, "1", advance is not None and advance <= 1))
    write = _count(report, "per_write_action")
    found.append(("durable_per_write", "durable transactions per write action", write, "<= 2",
                  write is not None and write <= 2))
    replay = _ratio(report, "replay_vs_plain_git")
    found.append(("replay_vs_git", "replay / plain git commit loop", replay, "<= 2x",
                  replay is not None and replay <= 2.0))
    orphans = _metric(report, "orphans_all_completed_s")
    count = report.facts.get("orphans")
    found.append(("orphans_completed", f"{count} orphans re-leased and completed by 2 worker "
                  "processes (s)", orphans, "<= 30 s", orphans is not None and orphans <= 30.0))
    growth = _metric(report, "long_run_rss_growth_pct")
    steps = report.facts.get("long_run_steps")
    found.append(("worker_memory_growth", f"worker RSS growth over {steps} steps (%)", growth,
                  "< 10%", growth is not None and growth < 10.0))
    report.targets += [Target(name=name, label=label, value=value, goal=goal, met=met)
                       for name, label, value, goal, met in found if value is not None]
