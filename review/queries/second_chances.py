"""What the run page shows about second chances (DESIGN.md section 6.12): the infrastructure reason a
run is stopped for, the run it was started again from, the runs started again from it, and what
the user may do about them."""

from __future__ import annotations

from typing import Any

from review.permissions import Perm
from runtime.decisions.second_chances import AGAIN_PHASES, run_infrastructure_stop, runs_again_of
from runtime.models import Run


def second_chance_context(*, run: Run, user: Any) -> dict[str, Any]:
    """``infrastructure_stop`` (or None), ``again_of`` (run id or ``""``), ``runs_again`` (run ids),
    ``can_run_again`` (a failed or cancelled run) and ``can_restart`` (the user's permission)."""
    return {
        "infrastructure_stop": run_infrastructure_stop(run_id=run.run_id),
        "again_of": run.again_of,
        "runs_again": runs_again_of(run_id=run.run_id),
        "can_run_again": run.phase in AGAIN_PHASES,
        "can_restart": user.has_perm(Perm.RESTART_RUN.value),
    }
