"""Rolling out new planner, adapter and model versions (DESIGN.md section 8).

:mod:`runtime.rollout.combinations` (version combinations: register, select, promote, roll back),
:mod:`runtime.rollout.admission` with :mod:`runtime.rollout.admission_thresholds` (the gate that
refuses new runs when rollout metrics cross a threshold), :mod:`runtime.rollout.pending_effects`
(what to check before admission re-opens), :mod:`runtime.rollout.rollout_log` (what the gate did
for one run) and the regression fixtures: :mod:`runtime.rollout.regress` (replay),
:mod:`runtime.rollout.regress_record` (record) and :mod:`runtime.rollout.regress_sources` (the
small source histories the fixtures replay, also used by the tests).
"""
