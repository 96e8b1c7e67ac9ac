"""Read-only queries behind the dashboard pages, one module per page. Nothing here writes a
runtime table. Views import the page module they need.

The approvals queue and the review case pages read through the runtime's services
(``runtime.approvals.approvals_waiting``, ``runtime.reviews.decision_prepare``); their lists are
paginated with a fixed page size, so their query counts do not grow with the number of runs.

Query counts are independent of how many runs, checkpoints and trace events exist (issue: "query
counts ... stay constant as runs and trace events grow tenfold"): lists are paginated with
Django's ``Paginator``, the runs list verifies the committed checkpoint of *the page's rows only*
with one query for their high-water marks and one for their envelopes, and the run detail reads
each table a fixed number of times.

The runtime's own services are the authority for verdicts: the run detail uses
``checkpoint_verify`` (the full restore checks), ``checkpoint_inspect`` (every stored row) and
``trace_verify`` (the hash chain). The runs list, which cannot afford four queries per row,
re-checks the committed envelope in bulk (:mod:`review.queries.committed_status`): MAC, schema,
HWM generation and digest, identity and scenario fingerprint.
"""
