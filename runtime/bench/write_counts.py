"""What one write action costs, counted: statements, round trips, durable transactions, fsyncs.

A write action is one proposal and its execution end to end (two engine steps, each a checkpoint
advance: the intent, then the receipt; DESIGN.md sections 3 and 4.3). :func:`steps_counted`
drives a run to the end under a :class:`runtime.bench.counting.DatabaseCounter` and returns the
counts of every step and of every write; :func:`workspace_write_counts` does it for a scripted
workspace run (the workspace adapter writes in this process, so its fsyncs are counted too) and
appends the counts to the report. :func:`workspace_task` writes such a run's task spec (also the
``scale`` section's).
"""

from __future__ import annotations

from pathlib import Path

from django.test import override_settings

from runtime.bench.counting import DatabaseCounter, DatabaseCounts, count_of
from runtime.bench.report import BenchReport
from runtime.core.checkpoint import Phase
from runtime.engine import StepReport, run_advance, run_start
from runtime.errors import BenchmarkError

COUNTED_WRITES = 6
"""Writes of the counted workspace run (the first one, which also pays the lease, the restore and
the first observation, is left out of the medians)."""


def workspace_task(*, directory: Path, task_id: str, writes: int, files: int | None = None) -> Path:
    """Write a scripted workspace task of ``writes`` writes with its empty workspace ``ws`` into
    ``directory``; return the spec's path. Write ``n`` goes to ``data/f<n>.txt``, or with
    ``files`` to ``data/f<n mod files>.txt`` (a long run rewrites a few files)."""
    (directory / "ws").mkdir(parents=True, exist_ok=True)
    lines = ['[task]', f'id = "{task_id}"', 'version = "1"', '',
             '[policy]', f'id = "{task_id}"', 'version = "1"', 'allowed_actions = ["write_file"]',
             'allowed_paths = ["**"]', 'approval_risks = []', '',
             '[policy.budgets]', f'proposals = {writes + 10}', f'steps = {2 * writes + 10}',
             'wall_seconds = 864000', 'cost_micros = 0', '',
             '[environment]', 'adapter = "workspace"', 'target = "ws"', '',
             '[planner]', 'kind = "scripted"', '']
    for n in range(writes):
        name = n % files if files else n
        lines += ['[[planner.steps]]', f'target = "data/f{name:03d}.txt"',
                  f'content = "step {n}\\n"', '']
    lines += ['[verifier]', 'kind = "always"', '']
    path = directory / "task.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def steps_counted(*, run_id: str, worker: str) -> tuple[list[DatabaseCounts], list[DatabaseCounts]]:
    """Drive ``run_id`` to the end in this process, counting; return the counts of every engine
    step and of every write action (the steps from one write's end to the next one's).

    Raises:
        BenchmarkError: the run did not complete, or completed without a write.
    """
    counter = DatabaseCounter()
    steps: list[DatabaseCounts] = []
    writes: list[DatabaseCounts] = []
    marks = {"step": counter.snapshot(), "write": counter.snapshot()}
    cursor = [0]

    def on_step(step: StepReport) -> None:
        now = counter.snapshot()
        steps.append(now.minus(marks["step"]))
        marks["step"] = now
        if step.cursor > cursor[0]:  # this step finished a write
            writes.append(now.minus(marks["write"]))
            marks["write"], cursor[0] = now, step.cursor

    with counter.installed():
        outcome = run_advance(run_id=run_id, worker=worker, on_step=on_step)
    if outcome.phase != Phase.COMPLETED or not writes:
        raise BenchmarkError(f"the counted run ended in {outcome.phase}", run_id=run_id)
    return steps, writes


def workspace_write_counts(*, report: BenchReport, work: Path) -> None:
    """Count a scripted workspace run of :data:`COUNTED_WRITES` writes with one commit per write
    off (a write whose proposal waits) and append the counts of one write action and of one
    engine step to ``report`` (with the client fsyncs); then :func:`folded_write_counts`.

    Raises:
        BenchmarkError: the run did not complete.
    """
    task = workspace_task(directory=work, task_id="bench-write-counts", writes=COUNTED_WRITES)
    # Unfolded: the price of a write whose proposal waits (an approval, a gateway call), which
    # keeps its two checkpoints; the default, folded write is counted next (DESIGN.md section 4.13).
    with override_settings(RATCHET_FOLD_INTENTS=False):
        run_id = run_start(spec_path=task, worker="bench-write-counts")
        steps, writes = steps_counted(run_id=run_id, worker="bench-write-counts")
    folded_write_counts(report=report, work=work / "folded")
    report.counts += [
        count_of("per_workspace_write_action", "one write action end to end (propose + execute) "
                 "whose proposal waits (two checkpoints), workspace adapter", writes[1:] or writes,
                 fsyncs=True),
        count_of("per_workspace_engine_step", "one engine step (= one checkpoint advance), "
                 "workspace adapter", steps[1:] or steps, fsyncs=True),
    ]


FOLDED_WRITES = 20
"""Writes of the run counted with one commit per write (DESIGN.md section 4.13)."""


def folded_write_counts(*, report: BenchReport, work: Path) -> None:
    """Count a scripted workspace run of :data:`FOLDED_WRITES` writes with
    ``RATCHET_FOLD_INTENTS`` on (the default), and record its durable main-database transactions per write:
    the mean over every write (the first also carries the session's lease acquisition, restore
    and first intent) and the largest of any write after the first, in ``report.facts``.

    Raises:
        BenchmarkError: the run did not complete.
    """
    task = workspace_task(directory=work, task_id="bench-folded-writes", writes=FOLDED_WRITES)
    with override_settings(RATCHET_FOLD_INTENTS=True):
        run_id = run_start(spec_path=task, worker="bench-folded-writes")
        _steps, writes = steps_counted(run_id=run_id, worker="bench-folded-writes")
    main = [w.main_durable_transactions for w in writes]
    report.facts["folded_main_transactions_per_write_mean"] = round(sum(main) / len(main), 4)
    report.facts["folded_main_transactions_first_write"] = main[0]
    report.facts["folded_main_transactions_per_write_max_after_first"] = max(main[1:] or main)
    report.counts.append(count_of("per_workspace_write_action_folded",
                                  "one write action with one commit per write "
                                  "(RATCHET_FOLD_INTENTS), workspace adapter", writes[1:] or writes,
                                  fsyncs=True))
