"""Signed evidence bundles: one JSON file that proves what happened in a run (DESIGN.md section 4.8).

:mod:`runtime.bundles.export` writes a run's bundle (checkpoints, ledger, trace, attachments,
rollout log, signed with the export key); :mod:`runtime.bundles.verification` checks one offline
with public keys only.
"""
