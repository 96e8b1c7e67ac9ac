"""The step engine: drives a run through the state machine of DESIGN.md sections 5 and 6, exactly once.

One *step* is one of: propose the next write and checkpoint its intent; execute (or reconcile) the
pending write and checkpoint the receipt; or verify completion. Every step ends in a checkpoint
commit (``runtime.checkpoints.session.session_commit``), which is fenced by the lease, so a worker that lost
its lease stops at its next commit and the adapter refuses its stale fencing token.

Crash windows (DESIGN.md section 5 table) and how :func:`run_advance` recovers from each:

=========================================  ===================================================
crash point                                 recovery
=========================================  ===================================================
before proposing                            re-observe, then decide (planner is deterministic)
intent persisted, no side-effect evidence   query the adapter by key; none -> execute with the
                                            same key (pre-state must still hold)
external success, receipt not persisted     query the adapter by key; found -> reconcile, never
                                            execute again
receipt persisted, state not advanced       replay the deterministic transition from the receipt
=========================================  ===================================================

Anything the engine cannot explain freezes the run in ``needs_review`` with a review case; it never
guesses (fail closed).

The services are re-exported here; the modules hold one concept each:

* :mod:`runtime.engine.start` -- ``run_start``: create a run, checkpoint generation 1;
* :mod:`runtime.engine.advance` -- ``run_advance``, ``StepReport``: the lease/restore/step loop;
* :mod:`runtime.engine.propose` -- observe, ask the planner, checkpoint the intent;
* :mod:`runtime.engine.execute` -- execute the pending write once, or reconcile; unknown outcomes;
* :mod:`runtime.engine.settle` -- check a receipt, record it, advance the run;
* :mod:`runtime.engine.complete` -- the verifier and the effects audit at the end of a run;
* :mod:`runtime.engine.recover` -- re-observe on resume; reconcile a write that beat its approval;
* :mod:`runtime.engine.freeze` -- freeze for review with a case, or stop with a reason;
* :mod:`runtime.engine.cancel` -- the settle-then-stop cancel (an operator's request is
  :func:`runtime.decisions.cancellation.run_request_cancel`).

The run session they all work in (lease, restore, fenced commit) is :mod:`runtime.checkpoints.session`.
"""

from __future__ import annotations

from runtime.engine.advance import StepReport, run_advance
from runtime.engine.start import run_start

__all__ = ("StepReport", "run_advance", "run_start")
