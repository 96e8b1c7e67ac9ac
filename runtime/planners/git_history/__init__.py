"""The git-history planner: replays a commit range of a source repository, one write per commit (DESIGN.md section 5).

Start at :mod:`runtime.planners.git_history.planner`; :mod:`runtime.planners.git_history.source`
and :mod:`runtime.planners.git_history.source_commits` (reading the source history),
:mod:`runtime.planners.git_history.replay_state` and
:mod:`runtime.planners.git_history.replay_target` (where the replay stands in the target);
:mod:`runtime.planners.git_history.history_builder` builds source histories to replay, the same
on every machine (the regression fixtures', the benchmarks' and the tests'). Framework-free.
"""
