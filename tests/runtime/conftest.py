"""Fixtures for the persistence tests: known keys in the environment and a run factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime.checkpoints.protocol import CommitResult, run_create
from runtime.core.checkpoint import RunState
from tests.factories import make_state
from tests.helpers.keys import TestKey


@pytest.fixture(autouse=True)
def keys(ratchet_keys: dict[str, TestKey]) -> dict[str, TestKey]:
    """Every test here signs with keys it knows, so leaks can be searched for."""
    return ratchet_keys


@pytest.fixture
def start_run() -> Callable[..., tuple[RunState, CommitResult]]:
    """``start_run(worker=, ttl_seconds=, **make_state_kwargs)`` -> ``(state, first commit)``."""

    def start(
        *, worker: str = "worker-a", ttl_seconds: float = 30.0, **kwargs: Any
    ) -> tuple[RunState, CommitResult]:
        state = make_state(**kwargs)
        return state, run_create(state=state, worker=worker, ttl_seconds=ttl_seconds)

    return start


def advance(state: RunState, **fields: Any) -> RunState:
    """A copy of ``state`` one step further (cursor + 1) with ``fields`` set."""
    nxt = state.model_copy(deep=True)
    nxt.cursor += 1
    for name, value in fields.items():
        setattr(nxt, name, value)
    return nxt
