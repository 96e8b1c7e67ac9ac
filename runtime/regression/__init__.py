"""Regression fixtures: recorded runs replayed against a version combination before a rollout (DESIGN.md section 8).

:mod:`runtime.regression.replay` (play the recorded runs, ``manage.py regress``),
:mod:`runtime.regression.record` (record a played run the way the fixtures hold it) and
:mod:`runtime.regression.sources` (the small source histories the fixtures replay; the tests
build their histories with it too). The fixtures themselves are ``fixtures/*.json``.
"""
