"""What people decide about a run: approvals, review decisions, cancels (DESIGN.md section 6).

Start at :mod:`runtime.decisions.approvals` (grant, refresh, deny the write a run waits on) and
:mod:`runtime.decisions.reviews` (review cases and signed reviewer decisions);
:mod:`runtime.decisions.cancellation` (an operator's request to stop a run) and
:mod:`runtime.decisions.verdicts` (how a run ended, as a script's exit code). These services sit
above the engine: they restore a run under its lease and hand it back to the workers.
"""
