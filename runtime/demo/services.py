"""The demo's outside services: the fake model and the orders API, each in its own process on loopback.

The demo's model-driven runs (:mod:`runtime.demo.agents`) need a model and an API to act on; the
demo brings its own, never the internet: the deterministic fake model server
(:mod:`runtime.demo.fake_model`, scripted replies) and the orders service
(:mod:`runtime.services.orders_service`, a SQLite store under the demo's directory).

Their ports and the orders service's bearer token are chosen at the first start and kept in
``<workdir>/services.json`` (owner-only), because the seeded runs' task specs name those ports
and a second start must serve the same runs. The token goes to the adapter through
``RATCHET_HTTP_TOKEN`` in the environment of the demo and its children, never into a spec,
checkpoint or trace (DESIGN.md section 5.9). Both processes are stopped by pid.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from runtime.demo.fake_model import FakeModelProcess, fake_model_start
from runtime.errors import DemoLaunchError

STATE_FILE = "services.json"
"""Under the demo's workdir: ``{"model_port", "orders_port", "token"}``."""

TOKEN_ENV = "RATCHET_HTTP_TOKEN"
EMAIL_ENV = "ORDERS_CUSTOMER_EMAIL"
DEMO_EMAIL = "ada@example.org"
"""The demo customer's e-mail: a secret input, so it reaches records only as a keyed digest."""

ROOT = Path(__file__).resolve().parents[2]


class DemoServices:
    """The fake model and the orders service of one demo directory.

    Args:
        workdir: the demo's directory (``var/demo``); the state file, the model's script and the
            orders database go there.

    Use :meth:`start`, then :attr:`model_base_url` / :attr:`orders_port` / :meth:`environ`, and
    always :meth:`stop`.
    """

    def __init__(self, *, workdir: Path) -> None:
        self.workdir = workdir
        self.model: FakeModelProcess | None = None
        self.orders: subprocess.Popen[str] | None = None
        self.orders_port = 0
        self._token = ""

    @property
    def model_base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` of the fake model."""
        if self.model is None:
            raise DemoLaunchError("the demo's fake model is not started")
        return self.model.base_url

    def environ(self) -> dict[str, str]:
        """The variables the HTTP adapter reads: the bearer token and the customer's e-mail."""
        return {TOKEN_ENV: self._token, EMAIL_ENV: DEMO_EMAIL}

    def _state(self) -> dict[str, Any]:
        try:
            data = json.loads((self.workdir / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict) or not isinstance(data.get("token"), str) or not data["token"]:
            data = {"model_port": 0, "orders_port": 0, "token": secrets.token_hex(16)}
        return data

    def _save(self, data: dict[str, Any]) -> None:
        path = self.workdir / STATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)

    def start(self, *, script: dict[str, Any]) -> None:
        """Start both services (on the ports of an earlier start, if any).

        Args:
            script: the fake model's script (``{"steps", "by_task"}``, see :mod:`runtime.demo.fake_model`).

        Raises:
            DemoLaunchError: a service did not start (its recorded port is taken: stop the other
                demo, or start over with ``--reset``).
        """
        state = self._state()
        self._token = state["token"]
        try:
            self.model = fake_model_start(script=script, workdir=self.workdir / "model",
                                          port=int(state.get("model_port") or 0))
        except RuntimeError:
            raise DemoLaunchError(f"the demo's fake model did not start on port {state.get('model_port') or 'any'}; "
                                  "stop the other demo using it, or run manage.py demo --reset") from None
        self.orders_port = self._orders_start(int(state.get("orders_port") or 0))
        self._save({"model_port": self.model.port, "orders_port": self.orders_port, "token": self._token})

    def _orders_start(self, port: int) -> int:
        env = {**os.environ, "ORDERS_SERVICE_TOKENS": f"demo:{self._token}", "PYTHONPATH": str(ROOT)}
        env.pop("RATCHET_CRASH_AT", None)
        cmd = [sys.executable, "-m", "runtime.services.orders_service", "--db", str(self.workdir / "orders.sqlite3"),
               "--port", str(port)]
        self.orders = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True,  # noqa: S603
                                       start_new_session=True)  # Ctrl-C goes to the demo command alone
        line = self.orders.stdout.readline() if self.orders.stdout else ""
        try:
            return int(json.loads(line)["port"])
        except (ValueError, KeyError, TypeError):
            raise DemoLaunchError(f"the demo's orders service did not start on port {port or 'any'}; stop the other "
                                  "demo using it, or run manage.py demo --reset") from None

    def stop(self) -> None:
        """Stop both services (this process started them), by pid."""
        if self.model is not None:
            self.model.stop()
        if self.orders is not None:
            if self.orders.poll() is None:
                self.orders.terminate()
                try:
                    self.orders.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.orders.kill()
                    self.orders.wait(timeout=10)
            if self.orders.stdout:
                self.orders.stdout.close()
