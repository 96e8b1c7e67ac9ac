"""Fixtures for the combination stories: the engine stories' keys and task files."""

from tests.engine.conftest import keys, workspace_task

__all__ = ["keys", "workspace_task"]
