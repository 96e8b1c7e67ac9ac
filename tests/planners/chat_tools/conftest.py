"""Fixtures for the chat-tools stories: a fake model server on loopback, in its own process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.demo.fake_model import FakeModelProcess, fake_model_start


@pytest.fixture(scope="session")
def shared_fake_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeModelProcess]:
    """One server for the session; each story loads its own script (counters start at zero)."""
    server = fake_model_start(script={"steps": []}, workdir=tmp_path_factory.mktemp("fake-model"))
    yield server
    server.stop()


@pytest.fixture
def fake_model(tmp_path: Path, shared_fake_model: FakeModelProcess) -> Iterator[Callable[..., FakeModelProcess]]:
    """``fake_model(steps)`` loads ``steps`` into the shared server; ``fake_model(steps, own=True, **kw)``
    starts a server of the story's own (``expect_key_env``, or one the story stops)."""
    started: list[FakeModelProcess] = []

    def start(steps: list[Any], *, own: bool = False, **kwargs: Any) -> FakeModelProcess:
        if not own and not kwargs:
            shared_fake_model.load(steps)
            return shared_fake_model
        server = fake_model_start(script={"steps": steps}, workdir=tmp_path / f"fake-model-{len(started)}", **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
