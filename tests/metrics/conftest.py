"""Fixtures for the metrics stories: the engine stories' keys, source history and task files."""

from tests.engine.conftest import keys, replay_task, source, workspace_task

__all__ = ["keys", "replay_task", "source", "workspace_task"]
