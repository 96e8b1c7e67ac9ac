"""Shared pieces of the chat-tools stories: a blob store, a trace list, a planner factory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from runtime.adapters.base import Observation
from runtime.planners.base import PlannerContext
from runtime.planners.chat_tools.options import ChatToolsOptions
from runtime.planners.chat_tools.planner import ChatToolsPlanner

TASK = "Write hello.txt with 'hello' and notes/todo.md with '- ship', then finish."


def write(path: str, content: str) -> dict[str, Any]:
    """A scripted reply: one write_file tool call."""
    return {"tool": "write_file", "arguments": {"path": path, "content": content}}


class Blobs:
    """An in-memory content-addressed store standing in for the attachment store."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def put(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.data[digest] = bytes(data)
        return digest

    def get(self, digest: str) -> bytes:
        return self.data[digest]


def observation(version: str = "w0") -> Observation:
    return Observation(instance_id="inst-1", version=version, state_fingerprint="sha256:" + "0" * 64,
                       kind="workspace")


def make_planner(base_url: str, *, blobs: Blobs, events: list[tuple[str, dict]] | None = None,
                 sleeps: list[float] | None = None, **options: Any) -> ChatToolsPlanner:
    """A planner on the fake model at ``base_url``; events and pauses are collected, not traced."""
    opts = ChatToolsOptions.model_validate({"task": TASK, "model": "fake-1", "base_url": base_url,
                                            "retry_backoff_seconds": 0.0, **options})
    sink = events if events is not None else []
    pauses = sleeps if sleeps is not None else []
    return ChatToolsPlanner(options=opts, context=PlannerContext(base_dir=None, target=Path("."),
                                                                 adapter="workspace"),
                            get_blob=blobs.get, trace=lambda t, p: sink.append((t, dict(p))),
                            sleep=pauses.append)


FILES = {"hello.txt": "hello\n", "notes/todo.md": "- ship\n"}
"""What the happy-path script writes."""

HAPPY_STEPS = [[write("hello.txt", "hello\n")], [write("notes/todo.md", "- ship\n")], [{"finish": "done"}]]


def write_chat_task(directory: Path, *, base_url: str, files: dict[str, str] | None = None,
                    allowed_paths: tuple[str, ...] = ("**",), approval_risks: tuple[str, ...] = (),
                    budget: int = 20, extra: str = "") -> Path:
    """A workspace task driven by the chat-tools planner on ``base_url``; ``files`` sets a
    files-equal verifier (default: :data:`FILES`). ``extra`` is appended to the ``[planner]`` table."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "workspace").mkdir(exist_ok=True)
    files = FILES if files is None else files
    lines = [
        "[task]", 'id = "chat-tools-story"', 'version = "1"', "",
        "[policy]", 'id = "chat"', 'version = "1"', 'allowed_actions = ["write_file", "delete_file"]',
        "allowed_paths = [" + ", ".join(json.dumps(p) for p in allowed_paths) + "]",
        "approval_risks = [" + ", ".join(json.dumps(r) for r in approval_risks) + "]", "",
        "[policy.budgets]", f"proposals = {budget}", f"steps = {budget}", "wall_seconds = 600", "",
        "[environment]", 'adapter = "workspace"', 'target = "workspace"', "",
        "[planner]", 'kind = "chat-tools"', f"task = {json.dumps(TASK)}", 'model = "fake-1"',
        f"base_url = {json.dumps(base_url)}", "retry_backoff_seconds = 0.0", "max_attempts = 2", extra, "",
        "[verifier]", 'kind = "files-equal"', "[verifier.files]",
        *(f"{json.dumps(path)} = {json.dumps(text)}" for path, text in sorted(files.items())),
    ]
    path = directory / "task.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def chat_planner_lines(*, base_url: str, task: str, risks: dict[str, str] | None = None,
                       max_attempts: int = 2) -> list[str]:
    """The ``[planner]`` table of a chat-tools task on the fake model at ``base_url`` (TOML lines)."""
    lines = ["[planner]", 'kind = "chat-tools"', f"task = {json.dumps(task)}", 'model = "fake-1"',
             f"base_url = {json.dumps(base_url)}", "retry_backoff_seconds = 0.0", f"max_attempts = {max_attempts}"]
    if risks:
        lines.append("risks = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in risks.items()) + " }")
    return lines
