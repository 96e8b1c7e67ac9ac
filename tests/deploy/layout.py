"""The deploy guide's ``ratchet.env`` and ``Procfile`` blocks, and the processes started from them.

The tests read the guide itself (``runtime/docs/guides/deploy.md``), so a guide that stops
working fails CI. Placeholders (``<...>``) are filled with the test's keys and random values;
processes run in their own sessions (``tests.celery.support.start_process``) and are stopped by
SIGTERM to their pid, then waited for.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import sys
from pathlib import Path

from tests.celery.support import Worker, start_process
from tests.helpers.keys import TestKey
from tests.helpers.procs import ROOT

DEPLOY_GUIDE = ROOT / "runtime" / "docs" / "guides" / "deploy.md"
SERVER_DIR = "/var/lib/ratchet"
"""The guide's directory for files a process keeps (beat's schedule, static files)."""
LAYOUT_REDIS_URL = os.environ.get("RATCHET_TEST_LAYOUT_REDIS_URL", "redis://127.0.0.1:6379/12")
"""The one Redis database the layout test owns (flushed before it runs)."""


def documented_block(first_line: str) -> list[str]:
    """The non-empty lines of the guide's ``sh`` block that starts with ``first_line``."""
    for block in re.findall(r"```sh\n(.*?)```", DEPLOY_GUIDE.read_text(encoding="utf-8"), re.S):
        lines = block.splitlines()
        if lines and lines[0].strip() == first_line:
            return [line for line in lines[1:] if line.strip()]
    raise AssertionError(f"{DEPLOY_GUIDE.name} has no sh block starting with {first_line!r}")


def documented_env(keys: dict[str, TestKey]) -> dict[str, str]:
    """The guide's ``ratchet.env``, placeholders filled: ``RATCHET_<ROOT>[_PUBLIC]_KEYS`` with
    ``keys`` (``tests.helpers.keys``), any other ``<...>`` with a random URL-safe value."""
    env = {}
    for line in documented_block("# ratchet.env"):
        name, sep, value = line.partition("=")
        assert sep and name.strip() == name and name.isupper(), f"not NAME=value: {line!r}"
        match = re.fullmatch(r"RATCHET_([A-Z]+?)(_PUBLIC)?_KEYS", name)
        if match:
            key = keys[match.group(1).lower()]
            value = key.public_spec if match.group(2) else key.spec
        else:
            value = re.sub(r"<[^>]*>", lambda _: secrets.token_urlsafe(48), value)
        env[name] = value
    return env


def documented_commands(*, directory: Path, ports: dict[str, int]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The guide's ``Procfile``: ``{name: (argv, env)}`` run by this interpreter, with the guide's
    server directory replaced by ``directory`` and each ``--port`` by ``ports[name]``; ``env`` holds
    the ``NAME=value`` pairs of a line's leading ``env`` (the agent processes' role)."""
    commands = {}
    for line in documented_block("# Procfile"):
        name, _, command = line.partition(":")
        argv = shlex.split(command.replace(SERVER_DIR, str(directory)))
        extra: dict[str, str] = {}
        if argv[0] == "env":
            argv.pop(0)
            while "=" in argv[0]:
                key, _, value = argv.pop(0).partition("=")
                extra[key] = value
        program = {"python": [sys.executable], "uvicorn": [sys.executable, "-m", "uvicorn"],
                   "celery": [sys.executable, "-m", "celery"]}[argv[0]]
        argv = program + argv[1:]
        if "--port" in argv:
            argv[argv.index("--port") + 1] = str(ports[name.strip()])
        commands[name.strip()] = (argv, extra)
    return commands


def without_private_keys(env: dict[str, str]) -> dict[str, str]:
    """``env`` as the guide says an agent process gets it: the private-key lines removed."""
    return {k: v for k, v in env.items() if not re.fullmatch(r"RATCHET_(APPROVAL|REVIEWER|EXPORT)_KEYS", k)}


def start(*, name: str, argv: list[str], directory: Path, env: dict[str, str]) -> Worker:
    """Start one process of the layout in its own session, output to ``directory``."""
    return start_process(directory=directory, name=name, command=argv, env=env)


def stop(process: Worker, *, timeout: float = 60) -> int:
    """SIGTERM to the process's pid, then wait for its exit code (fails after ``timeout`` s)."""
    if process.proc.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
    return process.wait_exit(timeout=timeout)
