"""The checkpoint commit protocol and its stores (DESIGN.md sections 3 and 4).

Start reading at :mod:`runtime.checkpoints.session` (a run restored under its lease and the fenced
commit of its next checkpoint), then :mod:`runtime.checkpoints.protocol` (commit and restore) and
:mod:`runtime.checkpoints.transaction` (the main-database transaction of one advance and the
mark's compare-and-set). The stores written inside that transaction or beside it:
:mod:`runtime.checkpoints.high_water_marks` (the mark, in a database of its own),
:mod:`runtime.checkpoints.mark_completion` (completing a mark the committer did not move),
:mod:`runtime.checkpoints.ledger` (the receipts ledger rows), :mod:`runtime.checkpoints.cases`
(review-case rows) and :mod:`runtime.checkpoints.receipts` (the rebuildable idempotency cache).
What a restore checks: :mod:`runtime.checkpoints.checks` (the envelope against its run and mark)
and :mod:`runtime.checkpoints.approval_checks` (approval evidence and receipts in the state);
per-row reports for pages and commands in :mod:`runtime.checkpoints.reports`.
"""
