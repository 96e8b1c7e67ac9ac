"""Who may advance a run and write to an environment (DESIGN.md section 4, Ownership).

:mod:`runtime.ownership.leases` (run leases, judged by the database clock),
:mod:`runtime.ownership.heartbeats` (keeping a lease through one long call) and
:mod:`runtime.ownership.environments` (one fencing-token counter per environment instance).
"""
