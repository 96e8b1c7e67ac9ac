"""Rolling out new planner, adapter and model versions (DESIGN.md section 8).

:mod:`runtime.rollout.combinations` (version combinations: register, select, promote, roll back),
:mod:`runtime.rollout.admission` with :mod:`runtime.rollout.admission_thresholds` (the gate that
refuses new runs when rollout metrics cross a threshold), :mod:`runtime.rollout.pending_effects`
(what to check before admission re-opens) and :mod:`runtime.rollout.rollout_log` (what the gate
did for one run). The regression fixtures played before a rollout are :mod:`runtime.regression`.
"""
