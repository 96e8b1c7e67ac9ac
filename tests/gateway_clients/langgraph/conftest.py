"""The LangGraph stories: the fake OpenAI-compatible model server on loopback (its own process),
and the MCP host's own packages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.planners.chat_tools.conftest import fake_model, shared_fake_model  # noqa: F401

MCP_HOST_PACKAGES = ("langchain-mcp-adapters>=0.3,<0.4", "mcp>=1.24,<2")
"""The MCP host's own packages: langchain-mcp-adapters pins ``mcp<2``, Ratchet's server needs 2."""


@pytest.fixture(scope="session")
def mcp_host_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the host's packages and everything they need (so the host's ``mcp``
    1.x finds its own dependencies, whatever this environment's ``mcp`` 2 left out), put first
    on the host process's ``PYTHONPATH`` only (the server never sees it). Installed
    with pip from the configured index; without one the stories skip, except under CI."""
    site = tmp_path_factory.mktemp("mcp-host-site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "--target", str(site), *MCP_HOST_PACKAGES], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"could not install the MCP host's packages: {done.stderr[-2000:]}")
        pytest.skip("the MCP host's packages could not be installed (no package index)")
    return site


ON_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


@pytest.fixture(autouse=True)
def _one_pass() -> None:
    """The LangGraph client stories run in the SQLite pass of tests/run, the Agents SDK ones in the
    PostgreSQL pass: each framework's side does not depend on the database, and the two passes
    run side by side, so each story once keeps the suite's time."""
    if ON_POSTGRES:
        pytest.skip("runs in the SQLite pass: the framework's side is the same on both "
                    "databases, and the gateway's stories cover each database")
