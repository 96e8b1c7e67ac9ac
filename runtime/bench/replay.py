"""Step throughput: a git-history replay through Ratchet against a plain ``git commit`` loop."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from runtime.adapters.base import Observation
from runtime.adapters.git.process import PROCESSES_STARTED
from runtime.bench.counting import count_of
from runtime.bench.report import BenchReport, Ratio, rate_metric
from runtime.bench.sizes import BenchSizes
from runtime.bench.write_counts import steps_counted
from runtime.core.canonical import DigestKind, digest, digest_bytes
from runtime.core.checkpoint import Phase
from runtime.engine import run_advance, run_start
from runtime.errors import BenchmarkError
from runtime.models import TraceEvent
from runtime.planners.base import Done
from runtime.planners.git_history.history_builder import commit_action_apply, history_git
from runtime.planners.git_history.planner import GitHistoryPlanner
from runtime.planners.git_history.replay_target import clone_at_base


def plain_git_replay(*, source: Path, commits: int, target: Path) -> float:
    """Make the same commits without Ratchet; return the seconds the commit loop took.

    The same planner proposes the same actions (reading the source's diffs and blobs); each is
    written to files by hand and committed with ``git add -A`` and ``git commit``
    (:func:`runtime.planners.git_history.history_builder.commit_action_apply`). No checkpoint,
    no receipt, no fencing: the baseline that exactly-once is compared against. The clone at the
    base is made before the clock starts.

    Raises:
        BenchmarkError: the loop's tree differs from the source tip's.
        ConfigurationError: git failed.
    """
    planner = GitHistoryPlanner(source=source, range=f"last:{commits}")
    state = planner.init_state()
    clone_at_base(source=source, base=str(state["base"]), target=target)
    blobs: dict[str, bytes] = {}

    def put(data: bytes) -> str:
        key = digest_bytes(data)
        blobs[key] = data
        return key

    seen = Observation(instance_id="plain", version="v0", kind="git",
                       state_fingerprint=digest(DigestKind.ENVIRONMENT, {"plain": True}))
    started = time.perf_counter()
    for cursor in range(commits):
        action = planner.propose(cursor=cursor, planner_state=state, observation=seen, put_blob=put)
        if isinstance(action, Done):
            raise BenchmarkError("the planner stopped early", cursor=cursor)
        commit_action_apply(repo=target, params=action.params, blob=blobs.__getitem__)
    elapsed = time.perf_counter() - started
    tip_tree = history_git(source, "rev-parse", f"{state['tip']}^{{tree}}").strip()
    if history_git(target, "rev-parse", "HEAD^{tree}").strip() != tip_tree:
        raise BenchmarkError("the plain git loop produced another tree than the source tip")
    return elapsed


def replay_measure(*, report: BenchReport, sizes: BenchSizes, source: Path, task: Path,
                   work: Path) -> None:
    """Replay ``task`` (``source``'s last ``sizes.commits`` commits) with ``run_advance`` and
    the same commits with :func:`plain_git_replay`, ``sizes.repeat`` times each; append the
    throughputs, their ratio and the trace events per run to ``report``.

    Args:
        report: the report to add to.
        sizes: ``commits`` per replay, ``repeat`` replays.
        source: the repository :func:`runtime.bench.history.build_source_history` built.
        task: the replay task :func:`runtime.bench.history.write_replay_task` wrote for it.
        work: where the plain loop's clones go (``plain-<i>``).

    Raises:
        BenchmarkError: a replay did not complete every write, or the plain loop failed.
    """
    ratchet: list[float] = []
    plain: list[float] = []
    events: list[int] = []
    processes: list[int] = []
    for i in range(sizes.repeat):
        run_id = run_start(spec_path=task, worker="bench-replay")
        if i == 0:
            # Counted once, in its own replay: counting never slows a timed one.
            _count_steps(report=report, run_id=run_id)
            run_id = run_start(spec_path=task, worker="bench-replay")
        started, spawned = time.perf_counter(), PROCESSES_STARTED[0]
        outcome = run_advance(run_id=run_id, worker="bench-replay")
        ratchet.append(time.perf_counter() - started)
        processes.append(PROCESSES_STARTED[0] - spawned)
        if outcome.phase != Phase.COMPLETED or outcome.cursor != sizes.commits:
            raise BenchmarkError(
                f"the replay ended in {outcome.phase} after {outcome.cursor} writes",
                run_id=run_id)
        events.append(TraceEvent.objects.filter(run_id=run_id).count())
        plain.append(plain_git_replay(source=source, commits=sizes.commits,
                                      target=work / f"plain-{i}"))
    n = sizes.commits
    report.metrics += [
        rate_metric("replay_writes_per_second", f"step throughput: replay of {n} commits",
                    "writes/s", [n / s for s in ratchet]),
        rate_metric("replay_ms_per_write", "  per exactly-once write (2 checkpoints each)", "ms",
                    [s * 1000.0 / n for s in ratchet]),
        rate_metric("git_ms_per_commit", "  plain `git commit` loop, per commit", "ms",
                    [s * 1000.0 / n for s in plain]),
    ]
    overhead = statistics.median(ratchet) / statistics.median(plain)
    report.facts["replay_commits"] = n
    report.ratios.append(Ratio(
        name="replay_vs_plain_git", label="replay / plain git commit loop", value=overhead,
        note="x the time: what exactly-once (checkpoints, receipts, fencing, trace) costs",
    ))
    report.facts["trace_events_per_replay_run"] = statistics.median(events)
    # The adapter's git children per write, whole run included (observe, predict, execute).
    report.facts["git_processes_per_write"] = round(statistics.median(processes) / n, 2)


def _count_steps(*, report: BenchReport, run_id: str) -> None:
    """Drive ``run_id`` to the end counting the database work of every step; append the counts
    per checkpoint advance (one engine step: one commit) and per write action (propose +
    execute of one write, end to end) to ``report``.

    Raises:
        BenchmarkError: the run did not complete.
    """
    steps, writes = steps_counted(run_id=run_id, worker="bench-replay-counted")
    # The first write also pays the lease, the restore and the first observation: left out.
    # No fsyncs: the git adapter's file work happens in git's child processes.
    report.counts += [
        count_of("per_engine_step", "one engine step (= one checkpoint advance), replay",
                 steps[1:] or steps),
        count_of("per_write_action", "one write action end to end (propose + execute), replay",
                 writes[1:] or writes),
    ]
