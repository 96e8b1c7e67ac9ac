"""Console scripts of the ``ratchet`` distribution (``[project.scripts]`` in pyproject.toml).

``ratchet-mcp`` serves the agent gateway's MCP server over stdio, exactly as ``manage.py gateway
--stdio`` (DESIGN.md sections 5.12 and 5.17): an MCP host starts it as a child from a working directory of
its own choosing, so nothing here depends on the working directory. The settings module is found
by import (the installed package), and ``runtime.project.settings`` locates its own files from
its path and from ``RATCHET_VAR_DIR``/``DATABASE_URL`` in the environment the host gives.
"""

from __future__ import annotations

import os
import sys


def mcp_stdio() -> None:
    """``ratchet-mcp [ARGS]``: ``gateway --stdio`` with the token from ``RATCHET_GATEWAY_TOKEN``.

    Exits like the management command: 1 with a message on stderr when no token is set (stdout
    stays the protocol's alone).
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["ratchet-mcp", "gateway", "--stdio", *sys.argv[1:]])
