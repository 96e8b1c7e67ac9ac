"""Read-only queries behind the dashboard pages, one module per page. Nothing here writes a
runtime table. Views import the page module they need.

The approvals queue and the review case pages read through the runtime's services
(``runtime.decisions.approvals.approvals_waiting``, ``runtime.decisions.reviews.decision_prepare``); their lists are
paginated with a fixed page size, so their query counts do not grow with the number of runs.

Query counts are independent of how many runs, checkpoints and trace events exist (a page must
cost the same with ten times the runs and events; ``tests/review/test_query_counts.py``): the runs list and the trace
browser are keyset-paginated (no ``COUNT(*)``), the runs list verifies the committed checkpoint
of *the page's rows only* with one query for their high-water marks and one for their envelopes,
and the run detail reads each table a fixed number of times (DESIGN.md section 6.8).

The runtime's own services are the authority for verdicts: the run detail uses
``checkpoint_verify`` (the full restore checks of the committed checkpoint), verifies the stored
checkpoint rows *on its page* with the runtime's envelope check (each verdict cached per row and
bytes), and re-hashes the trace (``trace_verify``) only on request. The runs list, which cannot
afford four queries per row, re-checks the committed envelope in bulk
(:mod:`review.queries.committed_status`): MAC, schema, HWM generation and digest, identity and
scenario fingerprint. :mod:`review.queries.live` says whether a polled page changed;
:mod:`review.queries.conflict_evidence` reads the content behind a review case.
"""
