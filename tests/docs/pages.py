"""Read a tutorial page's code blocks and run them as a reader would (tests/docs/test_tutorials.py).

The page is the test's only script. A fenced block with ``title="PATH"`` is a file: it is written
to ``PATH`` under the scratch directory, byte for byte. A ``sh`` block is commands, run in order
in that directory with bash; a trailing ``# exit N`` says which exit code the page promises
(default 0) and ``# prints TEXT`` what the last line of output must be. A block right after
``<!-- docs-test: skip (reason) -->`` is not run (a step the test's fixtures already did); one
after ``<!-- docs-test: background -->`` is a server: started, waited for until its port
answers, and stopped (by its process group) when the page is done.

What the test changes, and only this: ``.venv/bin/python`` is the interpreter running the
tests; ``manage.py`` is this checkout's; ``.venv/bin/pip install -e DIR`` installs DIR into a
scratch ``site`` directory on ``PYTHONPATH`` (without build isolation or dependencies, so the
test needs no index) instead of into the project's environment; ``RUN_ID`` is the id the last
``manage.py run`` printed (``run <id>``); the address ``127.0.0.1:8000`` is a free port, and so is
``8001`` (a page's second server, e.g. the fake model: ``127.0.0.1:8001`` and ``--port 8001``), so
two test passes side by side do not collide.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "runtime" / "docs"
MANAGE = ROOT / "manage.py"

FENCE = re.compile(r"^(?:<!-- docs-test: (?P<mode>skip|background)[^>]*-->\n\n?)?"
                   r"```(?P<lang>[\w-]+)(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)
TITLE = re.compile(r'title="([^"]+)"')
RUN_LINE = re.compile(r"^run (\S+)$", re.M)


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    body: str
    skipped: bool
    background: bool = False


def blocks(page: str) -> list[Block]:
    """The page's top-level fenced code blocks, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        title = TITLE.search(match["info"])
        found.append(Block(match["lang"], title.group(1) if title else None, match["body"],
                           match["mode"] == "skip", match["mode"] == "background"))
    return found


def commands(body: str) -> list[tuple[str, int, str | None]]:
    """``(command, expected exit code, expected last line)`` per command of a ``sh`` block."""
    joined = re.sub(r"\\\n\s*", " ", body)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        expected, prints = 0, None
        note = re.search(r"\s+#\s+(exit (\d+)|prints (.+))$", line)
        if note:
            line = line[: note.start()]
            if note.group(2):
                expected = int(note.group(2))
            else:
                prints = note.group(3)
        out.append((line, expected, prints))
    return out


@dataclass
class Reader:
    """Runs a page's blocks in ``workdir`` with ``env`` (the test database's environment)."""

    workdir: Path
    env: dict[str, str]
    run_id: str | None = None
    transcript: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    """Each command's standard output, in order."""
    servers: list[subprocess.Popen] = field(default_factory=list)
    port: int = field(default_factory=lambda: _free_port())
    second_port: int = field(default_factory=lambda: _free_port())

    @property
    def site(self) -> Path:
        return self.workdir / "site"

    def _translate(self, command: str) -> str:
        # Only a path the reader types (not one inside an already translated absolute path).
        reader_path = r"(?<![\w/.])\.venv/bin/"
        command = re.sub(reader_path + r"python manage\.py", f"{sys.executable} {MANAGE}", command)
        command = re.sub(reader_path + r"python", sys.executable, command)
        command = re.sub(reader_path + r"pip install -e (\S+)",
                         lambda m: f"{sys.executable} -m pip install -q --no-deps --no-build-isolation "
                                   f"--disable-pip-version-check --target {self.site} {m.group(1)}", command)
        command = command.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
        command = command.replace("127.0.0.1:8001", f"127.0.0.1:{self.second_port}")
        command = command.replace("--port 8001", f"--port {self.second_port}")
        if "RUN_ID" in command:
            assert self.run_id, f"the page uses RUN_ID before any run printed one: {command}"
            command = command.replace("RUN_ID", self.run_id)
        return command

    def run_page(self, page: str) -> None:
        """Write every file block and run every command block of ``page``, checking each promise;
        stop the page's servers at the end, whatever happened."""
        try:
            self._run_blocks(page)
        finally:
            for server in self.servers:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=30)

    def _run_blocks(self, page: str) -> None:
        for block in blocks(page):
            if block.skipped:
                continue
            if block.background:
                self.start_server(block.body.strip())
                continue
            if block.title:
                path = self.workdir / block.title
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(block.body, encoding="utf-8")
            elif block.lang == "sh":
                for command, expected, prints in commands(block.body):
                    self.run(command, expected, prints)

    def _env(self) -> dict[str, str]:
        return {**self.env, "PYTHONPATH": f"{ROOT}:{self.site}"}

    def start_server(self, command: str) -> None:
        """Start ``command`` in its own process group and wait until it accepts connections."""
        log = open(self.workdir / f"server-{len(self.servers)}.log", "w")  # the server writes to it until it stops
        server = subprocess.Popen(["bash", "-c", "exec " + self._translate(command)], cwd=self.workdir,
                                  env=self._env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.servers.append(server)
        port = self.second_port if "8001" in command else self.port
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert server.poll() is None, (self.workdir / log.name).read_text()
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise AssertionError(f"the server did not answer on port {port} within 120 s: {command}")

    def run(self, command: str, expected: int, prints: str | None) -> None:
        env = self._env()
        # "; exit $?" keeps bash from exec'ing the command, so a killed child reads as the reader's
        # shell shows it (137 = 128 + SIGKILL), not as Python's -9.
        done = subprocess.run(["bash", "-c", self._translate(command) + "\nexit $?"], cwd=self.workdir, env=env,
                              capture_output=True, text=True, timeout=300)
        self.transcript.append(f"$ {command}\n{done.stdout}{done.stderr}[exit {done.returncode}]")
        self.outputs.append(done.stdout)
        found = RUN_LINE.findall(done.stdout + "\n" + done.stderr)
        if found:
            self.run_id = found[0]
        assert done.returncode == expected, "\n\n".join(self.transcript)
        if prints is not None:
            last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
            assert last == prints, "\n\n".join(self.transcript)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
