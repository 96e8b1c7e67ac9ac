"""Operator tool errors: ``manage.py bench``, ``chaos`` and ``demo``.

Each sits under :class:`~runtime.errors.base.OperatorCommandError`: the tool could not set up or
measure what it set out to, no run's evidence is affected, and the cause is in the output above.
"""

from __future__ import annotations

from runtime.errors.base import OperatorCommandError

# --- benchmarks (manage.py bench) -------------------------------------------------------------


class BenchmarkError(OperatorCommandError):
    """A benchmark could not measure what it set out to (a child failed, a replay did not
    complete, a recovery froze or duplicated a write). Context names the run id or the child's
    exit code where there is one. Not retryable as such: the cause is in the output above."""

    default_message = "benchmark failed"
    hint = "no numbers were printed; the measuring child's output above says what failed"


class BenchmarkScratchError(BenchmarkError):
    """The throwaway database for ``manage.py bench`` cannot be made, or the measuring process
    is not pointed at one: benchmarks never run against the user's real database."""

    default_message = "refusing to benchmark outside a throwaway database"
    hint = ("benchmarks run only via `manage.py bench`, on the scratch database it creates and "
            "removes; drop a leftover <name>_bench by hand once no bench is running")


# --- the chaos command (manage.py chaos, DESIGN.md section 8.2) ----------------------------


class ChaosSetupError(OperatorCommandError):
    """``manage.py chaos`` could not set up what it tests with: its scratch store cannot be
    created or migrated, the task spec cannot be copied, or the uninterrupted run of the task does
    not complete on its own. Nothing was killed yet, so this is no finding about recovery."""

    default_message = "the chaos campaign could not be set up"
    hint = ("fix the task or the store named above (the uninterrupted run must complete without a "
            "human: no approval steps, a verifier it passes), then run `manage.py chaos` again")


# --- the demo (manage.py demo) ----------------------------------------------------------------


class DemoSetupError(OperatorCommandError):
    """The demo cannot seed its runs (for example the repository has too few commits)."""

    default_message = "the demo cannot be set up"
    hint = "run the demo from a clone of the repository with its full history (not shallow)"


class DemoLaunchError(OperatorCommandError):
    """The demo's web server or worker cannot be started (the port is taken, or the web server
    exited or did not listen in time). The message says which; the child's own output above
    says why."""

    default_message = "the demo's processes cannot be started"
    hint = "free the port or fix what the child's output above names, then run `manage.py demo` again"
