"""Fixtures for the adapter stories; the helpers behind them live in ``support.py``."""

from tests.adapters.support import blobs, env, git_env, repo, workspace_env  # noqa: F401
