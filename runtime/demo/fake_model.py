"""A deterministic fake model: an OpenAI-compatible chat-completions server with scripted replies.

The chat-tools planner (DESIGN.md section 6.7) is tested and demonstrated against this server,
never against the internet: it listens on loopback only, in its own process, and answers
``POST /v1/chat/completions`` from a JSON script. It counts the requests of every conversation
*step* so a test can prove the model was asked at most once per committed step, even across a
SIGKILL of the worker.

A conversation is named by the digest of its first two messages (system prompt and task); its step
is the number of assistant messages already in the request (0 for the first proposal). The script
is ``{"steps": [[reply, ...], ...]}``: step ``n`` answers its ``k``-th request with
``steps[n][k]`` (the last entry repeats); past the last step the model calls ``finish``. A reply is
one of:

* ``{"tool": NAME, "arguments": {...}}``: one tool call (``"raw_arguments": "..."`` sends the
  arguments string as given, e.g. not JSON);
* ``{"finish": "summary"}``: the ``finish`` tool;
* ``{"content": "text"}``: an assistant message without a tool call;
* ``{"refusal": "text"}``: a refusal;
* ``{"status": 429|500|..., "retry_after": seconds}``: an error response;
* ``{"raw_body": "text"}``: HTTP 200 whose body is not a chat completion;
* any of the above with ``"delay": seconds``: sleep first (a timeout for a short client timeout).

Several conversations can follow scripts of their own: ``{"steps": [...], "by_task": [{"match": TEXT,
"steps": [...]}, ...]}`` answers a conversation whose task message (the second message) contains
``TEXT`` from those steps (the first match wins; others use ``steps``). The demo serves its
model-driven runs from one server this way.

``POST /_script`` with a new script replaces the replies and zeroes every counter (tests share
one server). ``GET /_stats`` answers ``{"requests": {conversation: {step: count}}, "total": N, "auth": {...}}``
where ``auth`` counts whether the bearer token matched ``--expect-key-env`` (never the token).

Run it: ``python -m runtime.demo.fake_model --script FILE [--port 0] [--ready FILE]``; the ready
file receives ``{"port": N, "pid": P}`` once the socket listens. Imports nothing from Django.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"


class Script:
    """The scripted replies and the request counters, shared by the server's threads."""

    def __init__(self, steps: list[list[dict[str, Any]]], *, expected_key: str | None,
                 by_task: list[tuple[str, list[list[dict[str, Any]]]]] | None = None) -> None:
        self.steps = steps
        self.by_task = list(by_task or [])
        self.expected_key = expected_key
        self.counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.auth: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()

    def next_reply(self, conversation: str, step: int, task: str = "") -> tuple[int, dict[str, Any]]:
        """Count one request of ``conversation`` at ``step``; return ``(attempt, scripted reply)``.

        ``task`` is the conversation's task message: a ``by_task`` script whose text it contains
        answers instead of the default steps.
        """
        with self.lock:
            self.counts[conversation][step] += 1
            attempt = self.counts[conversation][step]
            steps = next((own for match, own in self.by_task if match in task), self.steps)
        if step >= len(steps) or not steps[step]:
            return attempt, {"finish": "script finished"}
        replies = steps[step]
        return attempt, replies[min(attempt, len(replies)) - 1]

    def replace(self, steps: list[list[dict[str, Any]]],
                by_task: list[tuple[str, list[list[dict[str, Any]]]]] | None = None) -> None:
        """Start over with new replies: every counter back to zero."""
        with self.lock:
            self.steps = steps
            self.by_task = list(by_task or [])
            self.counts.clear()
            self.auth.clear()

    def stats(self) -> dict[str, Any]:
        with self.lock:
            requests = {conv: {str(s): n for s, n in sorted(steps.items())}
                        for conv, steps in self.counts.items()}
            total = sum(n for steps in self.counts.values() for n in steps.values())
            return {"requests": requests, "total": total, "auth": dict(self.auth)}


def conversation_of(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """``(conversation id, step)`` of a request's ``messages`` (see the module docstring)."""
    head = json.dumps(messages[:2], sort_keys=True, separators=(",", ":")).encode()
    step = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    return hashlib.sha256(head).hexdigest()[:16], step


def completion(reply: dict[str, Any], *, model: str, conversation: str, step: int,
               attempt: int, prompt_chars: int) -> dict[str, Any]:
    """The chat-completion body for a scripted ``reply`` (tool call, finish, content, refusal)."""
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    finish_reason = "tool_calls"
    if "finish" in reply:
        reply = {"tool": "finish", "arguments": {"summary": reply["finish"]}}
    if "tool" in reply:
        args = reply.get("raw_arguments")
        if args is None:
            args = json.dumps(reply.get("arguments", {}), sort_keys=True)
        message["tool_calls"] = [{"id": f"call_{step}", "type": "function",
                                  "function": {"name": reply["tool"], "arguments": args}}]
    elif "refusal" in reply:
        message["refusal"] = reply["refusal"]
        finish_reason = "stop"
    else:
        message["content"] = reply.get("content", "")
        finish_reason = "stop"
    completion_tokens = int(reply.get("completion_tokens", 20))
    prompt_tokens = int(reply.get("prompt_tokens", max(1, prompt_chars // 4)))
    return {
        "id": f"chatcmpl-{conversation}-{step}-{attempt}",
        "object": "chat.completion",
        "created": 1_700_000_000 + step,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class Handler(BaseHTTPRequestHandler):
    """Answers chat-completions requests from the server's :class:`Script`."""

    server: FakeModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """Quiet: tests read ``/_stats``, not the request log."""

    def _send(self, status: int, body: bytes, *, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path.rstrip("/") == "/_stats":
            self._send(200, json.dumps(self.server.script.stats()).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") == "/_script":
            try:
                data = json.loads(raw)
                self.server.script.replace(parse_script(data), parse_by_task(data))
            except ValueError as exc:
                self._send(400, json.dumps({"error": {"message": str(exc)}}).encode())
                return
            self._send(200, b"{}")
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        try:
            request = json.loads(raw)
            messages = request["messages"]
        except (ValueError, KeyError, TypeError):
            self._send(400, b'{"error": {"message": "request is not a chat completion request"}}')
            return
        script = self.server.script
        if script.expected_key is not None:
            given = self.headers.get("Authorization", "")
            ok = given == f"Bearer {script.expected_key}"
            with script.lock:
                script.auth["matched" if ok else "mismatched"] += 1
            if not ok:
                self._send(401, b'{"error": {"message": "invalid api key", "code": "invalid_api_key"}}')
                return
        conversation, step = conversation_of(messages)
        task = messages[1].get("content") if len(messages) > 1 and isinstance(messages[1], dict) else ""
        attempt, reply = script.next_reply(conversation, step, task if isinstance(task, str) else "")
        if reply.get("delay"):
            time.sleep(float(reply["delay"]))
        if "status" in reply:
            headers = {}
            if "retry_after" in reply:
                headers["Retry-After"] = str(reply["retry_after"])
            body = {"error": {"message": f"scripted status {reply['status']}", "type": "scripted"}}
            self._send(int(reply["status"]), json.dumps(body).encode(), headers=headers)
            return
        if "raw_body" in reply:
            self._send(200, str(reply["raw_body"]).encode(), content_type="text/plain")
            return
        body = completion(reply, model=str(request.get("model", "fake")), conversation=conversation,
                          step=step, attempt=attempt, prompt_chars=len(raw))
        self._send(200, json.dumps(body).encode())


class FakeModelServer(ThreadingHTTPServer):
    """The loopback HTTP server; ``script`` holds the replies and counters."""

    daemon_threads = True

    def __init__(self, script: Script, port: int = 0) -> None:
        super().__init__((LOOPBACK, port), Handler)
        self.script = script


def load_script(path: Path) -> list[list[dict[str, Any]]]:
    """The ``steps`` of a script file (see :func:`parse_script`).

    Raises:
        ValueError: the file is not ``{"steps": [...]}``.
    """
    return parse_script(json.loads(Path(path).read_text()))


def parse_by_task(data: Any) -> list[tuple[str, list[list[dict[str, Any]]]]]:
    """The ``by_task`` scripts of ``data``: ``[(match, steps), ...]`` (empty when absent).

    Raises:
        ValueError: ``by_task`` is not a list of ``{"match": TEXT, "steps": [...]}``.
    """
    entries = data.get("by_task", []) if isinstance(data, dict) else []
    if not isinstance(entries, list):
        raise ValueError("by_task is a list of {\"match\": TEXT, \"steps\": [...]}")
    out: list[tuple[str, list[list[dict[str, Any]]]]] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("match"), str) or not entry["match"]:
            raise ValueError("each by_task entry is {\"match\": TEXT, \"steps\": [...]}")
        out.append((entry["match"], parse_script(entry)))
    return out


def parse_script(data: Any) -> list[list[dict[str, Any]]]:
    """The ``steps`` of a script, each step a list of replies (a single reply is wrapped).

    Raises:
        ValueError: ``data`` is not ``{"steps": [...]}``.
    """
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        raise ValueError("a fake model script is {\"steps\": [[reply, ...], ...]}")
    return [step if isinstance(step, list) else [step] for step in steps]


@dataclass
class FakeModelProcess:
    """A fake model server running in its own process (started by :func:`fake_model_start`).

    Attributes:
        process: the child; :meth:`stop` ends it by its pid.
        port: the loopback port it listens on.
    """

    process: subprocess.Popen[bytes]
    port: int

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://127.0.0.1:<port>/v1``."""
        return f"http://{LOOPBACK}:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        """``GET /_stats``: requests per conversation and step, total, auth matches."""
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.port}/_stats", timeout=10) as response:  # noqa: S310
            return dict(json.loads(response.read()))

    def load(self, steps: list[Any]) -> None:
        """``POST /_script``: answer from ``steps`` from now on, every counter back to zero."""
        request = urllib.request.Request(f"http://{LOOPBACK}:{self.port}/_script", method="POST",
                                         data=json.dumps({"steps": steps}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            response.read()

    def requests_per_step(self) -> dict[int, int]:
        """Requests per step of the only conversation seen (empty before the first request).

        Raises:
            ValueError: the server saw more than one conversation.
        """
        requests = self.stats()["requests"]
        if len(requests) > 1:
            raise ValueError(f"the fake model saw {len(requests)} conversations")
        return {int(step): n for conv in requests.values() for step, n in conv.items()}

    def stop(self) -> None:
        """Terminate the server (this process started it) and reap it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def fake_model_start(*, script: dict[str, Any], workdir: Path, expect_key_env: str | None = None,
                     timeout: float = 20.0, port: int = 0) -> FakeModelProcess:
    """Write ``script`` under ``workdir`` and start a server for it in a child process.

    Args:
        script: ``{"steps": [...]}`` (see the module docstring).
        workdir: a directory for the script and the ready file.
        expect_key_env: the variable (in this environment) holding the key the server expects.
        timeout: seconds to wait for the server to listen.
        port: the loopback port (0: a free one).

    Raises:
        RuntimeError: the server exited or did not listen in time (the port may be in use).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    script_path = workdir / "fake-model-script.json"
    ready = workdir / "fake-model-ready.json"
    ready.unlink(missing_ok=True)
    script_path.write_text(json.dumps(script))
    cmd = [sys.executable, "-m", "runtime.demo.fake_model", "--script", str(script_path), "--ready", str(ready),
           "--port", str(port)]
    if expect_key_env:
        cmd += ["--expect-key-env", expect_key_env]
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    # Its own session: a Ctrl-C in the terminal reaches the demo command, which stops the worker
    # first; the model must outlive the worker's last call, or a running run freezes.
    process = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL,  # noqa: S603
                               start_new_session=True)
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
            raise RuntimeError(f"the fake model server did not start (exit code {process.returncode})")
        time.sleep(0.02)
    return FakeModelProcess(process=process, port=int(json.loads(ready.read_text())["port"]))


def main(argv: list[str] | None = None) -> None:
    """Serve until killed (SIGTERM/SIGKILL from the parent that started it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready", type=Path, help="write {port, pid} here once listening")
    parser.add_argument("--expect-key-env", help="environment variable holding the expected API key")
    args = parser.parse_args(argv)
    expected = os.environ.get(args.expect_key_env) if args.expect_key_env else None
    data = json.loads(Path(args.script).read_text())
    server = FakeModelServer(Script(parse_script(data), expected_key=expected, by_task=parse_by_task(data)),
                             args.port)
    if args.ready:
        tmp = args.ready.with_suffix(".tmp")
        tmp.write_text(json.dumps({"port": server.server_address[1], "pid": os.getpid()}))
        tmp.replace(args.ready)  # atomic: the parent never reads half a file
    server.serve_forever()


if __name__ == "__main__":
    main()
