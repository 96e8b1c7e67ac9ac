"""A started external run and a token for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.gateway.tokens import token_issue
from tests.gateway.support import effects_by_key, write_external_task


@dataclass
class GatewayStory:
    run_id: str
    token: str
    token_id: str
    workspace: Path

    def effects(self) -> dict[str, int]:
        return effects_by_key(self.workspace)


@pytest.fixture
def gw(tmp_path: Path, ratchet_keys) -> GatewayStory:
    spec = write_external_task(tmp_path)
    run_id = run_start(spec_path=spec, worker="starter")
    issued = token_issue(run_id=run_id, agent="story-agent")
    return GatewayStory(run_id=run_id, token=issued.token, token_id=issued.token_id, workspace=tmp_path / "ws")
