"""The demo's model-driven runs: the chat-tools planner against the fake model (DESIGN.md section 6.7).

===================  =========================================================================
scenario             how it is reached
===================  =========================================================================
running              a model that thinks :data:`RUNNING_DELAY_SECONDS` per reply writes
                     :data:`RUNNING_STEPS` notes into a workspace; the Celery worker drives it,
                     so it stays visibly running for minutes
agent_orders         a model books orders through the HTTP adapter on the demo's orders
                     service; ``http_request`` is high risk, so each booking waits for an
                     operator's approval (its request, headers and body redacted, as the diff)
agent_ledger         a model records orders in a SQLite ledger through the SQL adapter (named
                     templates only, never SQL of its own), to the end
===================  =========================================================================

Every run's replies come from one fake model server (:mod:`runtime.demo.services`), which keeps a
script per run: each task text carries a marker the server matches (``by_task``). The model only
proposes; the policy, the approval rules and the adapters decide, as for any planner.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.taskspec.writing import toml_dumps

RUNNING_STEPS = 60
"""Notes the slow model writes before it calls ``finish``."""

RUNNING_DELAY_SECONDS = 4.0
"""How long the fake model takes for each reply of the running scenario (seconds)."""

ACCOUNT = "demo"
MARKS = {"running": "[demo:slow-notes]", "agent_orders": "[demo:orders]", "agent_ledger": "[demo:ledger]"}
"""The text in each task that tells the fake model which script answers it."""


@dataclass(frozen=True)
class AgentScenario:
    """One model-driven demo run: ``name`` and what the dashboard shows for it."""

    name: str
    description: str


AGENT_SCENARIOS = (
    AgentScenario("running", f"a model thinking {RUNNING_DELAY_SECONDS:g} s per step writes {RUNNING_STEPS} notes; "
                             "running for minutes"),
    AgentScenario("agent_orders", "a model books orders through the HTTP orders service; each waits for approval"),
    AgentScenario("agent_ledger", "a model records orders in a SQL ledger through the SQL adapter; completed"),
)


def _call(tool: str, arguments: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    return [{"tool": tool, "arguments": arguments, **extra}]


def _order(sku: str, quantity: int) -> dict[str, Any]:
    return {"target": f"/v1/accounts/{ACCOUNT}/orders", "params": {"method": "POST", "body": {
        "sku": sku, "quantity": quantity, "customer": {"name": "Ada", "email": {"$secret": "customer_email"}}}}}


def _ledger(order_ref: str, sku: str, quantity: int) -> dict[str, Any]:
    return {"params": {"order_ref": order_ref, "sku": sku, "quantity": quantity, "customer": "Ada"}}


def model_script() -> dict[str, Any]:
    """The fake model's script for every model-driven demo run (``by_task``, by marker)."""
    notes = [_call("write_file", {"path": f"notes/step-{n:02d}.md",
                                  "content": f"# Step {n}\n\nThe slow model wrote this note at step {n}.\n"},
                   delay=RUNNING_DELAY_SECONDS) for n in range(RUNNING_STEPS)]
    return {"steps": [], "by_task": [
        {"match": MARKS["running"], "steps": [*notes, [{"finish": f"{RUNNING_STEPS} notes written"}]]},
        {"match": MARKS["agent_orders"], "steps": [_call("http_request", _order("tea-green", 2)),
                                                   _call("http_request", _order("tea-black", 1)),
                                                   [{"finish": "two orders booked"}]]},
        {"match": MARKS["agent_ledger"], "steps": [_call("record_order", _ledger("ord-1", "tea-green", 2)),
                                                   _call("record_order", _ledger("ord-2", "tea-black", 1)),
                                                   [{"finish": "two orders recorded"}]]},
    ]}


def _task(*, name: str, description: str, allowed: list[str], approval: list[str], adapter: str, target: str,
          options: dict[str, Any] | None, task: str, base_url: str, risks: dict[str, str], budget: int,
          paths: list[str] | None = None, timeout_seconds: float = 8.0) -> str:
    dashed = f"demo-{name.replace('_', '-')}"
    environment: dict[str, Any] = {"adapter": adapter, "target": target, **({"options": options} if options else {})}
    return toml_dumps({
        "task": {"id": dashed, "version": "1"},
        "policy": {"id": dashed, "version": "1", "allowed_actions": allowed, "allowed_paths": paths or [],
                   "approval_risks": approval,
                   "budgets": {"proposals": budget, "steps": budget, "wall_seconds": 3600}},
        "environment": environment,
        "planner": {"kind": "chat-tools", "task": task, "model": "demo-fake-model", "base_url": base_url,
                    "timeout_seconds": timeout_seconds, "max_attempts": 2, "risks": risks},
        "verifier": {"kind": "always"},
    }, comment=f'Demo scenario "{name}": {description}.\n'
               "Written by `manage.py demo`; the model is the demo's fake model server (scripted replies).")


LEDGER_DDL = ("CREATE TABLE IF NOT EXISTS ledger (order_ref VARCHAR(40) PRIMARY KEY, sku VARCHAR(40) NOT NULL, "
              "quantity INTEGER NOT NULL, customer VARCHAR(100) NOT NULL)")


def _orders_options(port: int) -> dict[str, Any]:
    return {
        "base_url": f"http://127.0.0.1:{port}", "allowed_hosts": [f"127.0.0.1:{port}"], "allowed_methods": ["POST"],
        "allowed_paths": ["/v1/accounts/{account}/orders"], "state_path": f"/v1/accounts/{ACCOUNT}/state",
        "lookup_path": f"/v1/accounts/{ACCOUNT}/idempotency/{{key}}",
        "receipts_path": f"/v1/accounts/{ACCOUNT}/idempotency", "probe_path": "/v1/whoami",
        "credential_env": "RATCHET_HTTP_TOKEN", "redact_json_paths": ["customer.email"],
        "secret_inputs": {"customer_email": "ORDERS_CUSTOMER_EMAIL"}, "timeout_seconds": 10,
    }


def _ledger_options(database: Path) -> dict[str, Any]:
    text = {"type": "string", "min_length": 1, "max_length": 40, "pattern": "^[A-Za-z0-9-]+$"}
    return {"url": f"sqlite:///{database}", "templates": {"record_order": {
        "description": "Record one booked order in the ledger.",
        "sql": "INSERT INTO ledger (order_ref, sku, quantity, customer) "
               "VALUES (:order_ref, :sku, :quantity, :customer)",
        "tables": ["ledger"], "expect_rows": 1,
        "params": {"order_ref": text, "sku": text, "quantity": {"type": "integer", "minimum": 1, "maximum": 1000},
                   "customer": {"type": "string", "min_length": 1, "max_length": 100}}}}}


def agent_task_write(*, scenario: AgentScenario, workdir: Path, model_base_url: str, orders_port: int) -> Path:
    """Write the scenario's task spec to ``<workdir>/tasks/<name>.toml`` (and prepare its target).

    The running scenario's workspace is ``<workdir>/targets/running``; the ledger scenario's
    SQLite database ``<workdir>/ledger.sqlite3`` gets its ``ledger`` table here.
    """
    tasks = workdir / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    name = scenario.name
    common = {"name": name, "description": scenario.description, "base_url": model_base_url}
    if name == "running":
        (workdir / "targets" / "running").mkdir(parents=True, exist_ok=True)
        text = _task(**common, allowed=["write_file"], approval=[], adapter="workspace", target="../targets/running",
                     options=None, paths=["notes/**"], budget=RUNNING_STEPS + 10, risks={"write_file": "low"},
                     timeout_seconds=RUNNING_DELAY_SECONDS * 3,
                     task=f"{MARKS[name]} Write one short note per step under notes/, {RUNNING_STEPS} in all, "
                          "then finish.")
    elif name == "agent_orders":
        text = _task(**common, allowed=["http_request"], approval=["high"], adapter="http", target=".",
                     options=_orders_options(orders_port), budget=10, risks={"http_request": "high"},
                     task=f"{MARKS[name]} Book two green teas and one black tea for Ada on account "
                          f"{ACCOUNT}, one order per call, then finish.")
    elif name == "agent_ledger":
        database = (workdir / "ledger.sqlite3").resolve()
        with sqlite3.connect(database) as conn:
            conn.execute(LEDGER_DDL)
        conn.close()
        text = _task(**common, allowed=["record_order"], approval=["high"], adapter="sql", target=".",
                     options=_ledger_options(database), budget=10, risks={"record_order": "low"},
                     task=f"{MARKS[name]} Record Ada's two booked orders (ord-1: two green teas, ord-2: one "
                          "black tea) in the ledger, then finish.")
    else:
        raise ValueError(f"no agent scenario named {name!r}")
    path = tasks / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path
