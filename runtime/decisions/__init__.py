"""What people decide about a run: approvals, review cases and signed decisions (DESIGN.md section 6).

Start at :mod:`runtime.decisions.approvals` (grant, refresh, deny the write a run waits on) and
:mod:`runtime.decisions.reviews` (review cases and reviewer decisions). The engine's checks of
approval evidence and receipts are in :mod:`runtime.decisions.approval_checks`; case rows in
:mod:`runtime.decisions.cases`; how a run ended, as an exit code, in
:mod:`runtime.decisions.verdicts`.
"""
