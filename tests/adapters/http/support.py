"""The orders service in its own process, and HTTP adapters pointed at it, for the HTTP stories.

:class:`OrdersService` starts ``python -m runtime.services.orders_service`` on loopback (a free
port, kept across restarts), reads its ready line, and can SIGKILL it by pid and start it again
on the same database. Counts come from the service's own SQLite store, never from the adapter.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runtime.adapters.http.adapter import HttpAdapter
from runtime.core.checkpoint import Action

ROOT = Path(__file__).resolve().parents[3]
ACCOUNT = "acme"
TOKEN_ENV = "RATCHET_HTTP_TOKEN"
EMAIL_ENV = "ORDERS_CUSTOMER_EMAIL"
CUSTOMER_EMAIL = "ada.lovelace@example.org"


def options(port: int, **overrides: Any) -> dict[str, Any]:
    """The adapter options for the orders service on ``port`` (mapping form, as a spec holds them)."""
    base = {
        "base_url": f"http://127.0.0.1:{port}",
        "allowed_hosts": [f"127.0.0.1:{port}"],
        "allowed_methods": ["POST"],
        "allowed_paths": ["/v1/accounts/{account}/orders"],
        "state_path": f"/v1/accounts/{ACCOUNT}/state",
        "lookup_path": f"/v1/accounts/{ACCOUNT}/idempotency/{{key}}",
        "receipts_path": f"/v1/accounts/{ACCOUNT}/idempotency",
        "probe_path": "/v1/whoami",
        "credential_env": TOKEN_ENV,
        "redact_json_paths": ["customer.email", "payment_token"],
        "secret_inputs": {"customer_email": EMAIL_ENV},
        "timeout_seconds": 5,
    }
    base.update(overrides)
    return base


def order(sku: str = "tea-001", quantity: int = 2, *, path: str = f"/v1/accounts/{ACCOUNT}/orders",
          method: str = "POST") -> Action:
    """An ``http_request`` action creating one order; the e-mail is a secret input, never inline."""
    return Action(kind="http_request", target=path, params={"method": method, "body": {
        "sku": sku, "quantity": quantity, "customer": {"name": "Ada", "email": {"$secret": "customer_email"}}}})


@dataclass
class OrdersService:
    """One orders service process on loopback and its database."""

    db: Path
    token: str
    env: dict[str, str]
    port: int = 0
    proc: subprocess.Popen[str] | None = None
    extra_args: list[str] = field(default_factory=list)

    def start(self, *args: str, crash_at: str | None = None) -> OrdersService:
        """Start (or restart on the same port) with ``args``; wait for the ready line."""
        env = {**self.env, "ORDERS_SERVICE_TOKENS": f"agent:{self.token}", "PYTHONPATH": str(ROOT)}
        env.pop("RATCHET_CRASH_AT", None)
        if crash_at:
            env["RATCHET_CRASH_AT"] = crash_at
        cmd = [sys.executable, "-m", "runtime.services.orders_service", "--db", str(self.db),
               "--port", str(self.port), *args]
        self.proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            raise RuntimeError(f"orders service did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")
        self.port = json.loads(line)["port"]
        return self

    def kill(self) -> None:
        """SIGKILL the service by its pid (only the process this helper started)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream:
                    stream.close()

    def wait_killed(self, timeout: float = 20) -> int:
        """Wait for a service armed with a crash point to SIGKILL itself; returns its exit code."""
        if self.proc is None:
            raise RuntimeError("not started")
        return self.proc.wait(timeout=timeout)

    def orders_per_key(self) -> dict[str, int]:
        """``key -> number of orders`` straight from the service's SQLite store."""
        with sqlite3.connect(self.db) as conn:
            rows = conn.execute("SELECT idempotency_key, count(*) FROM orders WHERE account = ? "
                                "GROUP BY idempotency_key", (ACCOUNT,)).fetchall()
        return dict(rows)

    def records_for(self, key: str) -> list[str]:
        """Statuses of the service's idempotency records for ``key`` (at most one)."""
        with sqlite3.connect(self.db) as conn:
            rows = conn.execute("SELECT status FROM idempotency WHERE account = ? AND key = ?",
                                (ACCOUNT, key)).fetchall()
        return [r[0] for r in rows]

    def expire_credential(self) -> None:
        """Expire every credential in the service's store (an operator revoking the token)."""
        with sqlite3.connect(self.db) as conn:
            conn.execute("UPDATE credentials SET expires_at = 0")

    def adapter(self, **overrides: Any) -> HttpAdapter:
        """A fresh adapter (a new process's view: nothing cached) on this service."""
        return HttpAdapter(options=options(self.port, **overrides), environ=self.env)


def adapter_env(tmp_path: Path) -> dict[str, str]:
    """Environment for adapters and children: credential, secret input, redaction key, no crash point."""
    env = dict(os.environ)
    env.pop("RATCHET_CRASH_AT", None)
    env[TOKEN_ENV] = "tok-" + secrets.token_hex(16)
    env[EMAIL_ENV] = CUSTOMER_EMAIL
    env["RATCHET_REDACTION_KEY"] = "test-redact:" + base64.b64encode(secrets.token_bytes(32)).decode()
    env["PYTHONPATH"] = str(ROOT)
    return env


def _service(directory: Path) -> Iterator[OrdersService]:
    env = adapter_env(directory)
    service = OrdersService(db=directory / "orders.sqlite3", token=env[TOKEN_ENV], env=env).start()
    try:
        yield service
    finally:
        service.kill()


@pytest.fixture
def orders(tmp_path: Path) -> Iterator[OrdersService]:
    """A running orders service of its own; killed at the end of the test."""
    yield from _service(tmp_path)


@pytest.fixture(scope="module")
def shared_orders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrdersService]:
    """One orders service for a module's read-only or refusal stories (starting one costs a second)."""
    yield from _service(tmp_path_factory.mktemp("orders"))


CHILD = Path(__file__).with_name("child_http_execute.py")


def run_child(service: OrdersService, action: Action, key: str, *, token: int = 1, crash_at: str | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Execute ``action`` with ``key`` in a child process (armed with ``crash_at`` if given)."""
    env = dict(service.env)
    if crash_at:
        env["RATCHET_CRASH_AT"] = crash_at
    spec = {"options": options(service.port), "action": action.model_dump(mode="json"), "key": key,
            "intent_digest": action.intent_digest(), "token": token}
    return subprocess.run([sys.executable, str(CHILD), json.dumps(spec)], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def no_blobs(digest: str) -> bytes:
    """HTTP actions carry their body inline; no blob is ever asked for."""
    raise AssertionError(f"unexpected blob request {digest}")
