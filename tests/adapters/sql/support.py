"""Helpers for the SQL adapter stories: a target database with an ``orders`` table, and children.

A :class:`Target` is a real database: a SQLite file, or a PostgreSQL database of its own on the
server ``DATABASE_URL`` points at (created per test, dropped afterwards). Everything the stories
count -- business rows per idempotency key, receipt rows -- is read from the target database with
the driver, never from what the adapter says about itself.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from runtime.adapters.sql.adapter import SqlAdapter
from runtime.core.checkpoint import Action
from runtime.taskspec.writing import toml_value

CHILD = Path(__file__).with_name("child_sql.py")
ROOT = Path(__file__).resolve().parents[3]

CARD = "4111111111111111"
"""A card number: a value the options redact, which must never leave the adapter in clear."""
OTHER_CARD = "5500000000000004"
SECRET_ENV = {"ORDERS_CARD": CARD, "ORDERS_OTHER_CARD": OTHER_CARD, "ORDERS_BAD_CARD": "4111-1111-1111-1111"}
"""Where the secret inputs come from: the environment of the test process and its children."""

ORDERS_DDL = ("CREATE TABLE orders (order_id VARCHAR(40) PRIMARY KEY, idempotency_key VARCHAR(200) NOT NULL, "
              "customer VARCHAR(100) NOT NULL, card VARCHAR(16) NOT NULL, amount_cents INTEGER NOT NULL "
              "CHECK (amount_cents >= 0))")

OPTIONS: dict[str, Any] = {
    "templates": {
        "record_order": {
            "description": "Record one order.",
            "sql": "INSERT INTO orders (order_id, idempotency_key, customer, card, amount_cents) "
                   "VALUES (:order_id, :key, :customer, :card, :amount_cents) RETURNING order_id, card",
            "tables": ["orders"],
            "expect_rows": 1,
            "params": {
                "order_id": {"type": "string", "max_length": 40, "pattern": "^[a-z0-9-]+$"},
                "key": {"type": "string", "max_length": 200},
                "customer": {"type": "string", "max_length": 100},
                "card": {"type": "string", "pattern": "^[0-9]{16}$"},
                "amount_cents": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
            },
        },
        "cancel_order": {
            "sql": "DELETE FROM orders WHERE order_id = :order_id",
            "tables": ["orders"],
            "expect_rows": 1,
            "params": {"order_id": {"type": "string", "max_length": 40}},
        },
    },
    "redact_columns": ["orders.card"],
    "secret_inputs": {"card": "ORDERS_CARD", "other_card": "ORDERS_OTHER_CARD", "bad_card": "ORDERS_BAD_CARD"},
}


def order(order_id: str, key: str, *, amount: int = 500, customer: str = "ada", card: str = "card") -> Action:
    """A ``record_order`` action whose row carries its idempotency key (so rows can be counted per key);
    ``card`` names the secret input holding the card number."""
    return Action(kind="record_order", params={"order_id": order_id, "key": key, "customer": customer,
                                               "card": {"$secret": card}, "amount_cents": amount})


@dataclass
class Target:
    """A target database for the SQL adapter (``kind`` is ``"sqlite"`` or ``"postgres"``)."""

    kind: str
    url: str
    options: dict[str, Any] = field(default_factory=lambda: json.loads(json.dumps(OPTIONS)))

    def adapter(self) -> SqlAdapter:
        """A fresh adapter on the target (a new worker's view: nothing cached)."""
        return SqlAdapter(options={**self.options, "url": self.url})

    def sql(self, statement: str, params: tuple = ()) -> list[tuple]:
        """Run one statement with the plain driver, commit, return the rows (if any)."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
                cur = conn.execute(statement.replace("%s", "?"), params)
                rows = cur.fetchall()
            conn.close()
            return rows
        with psycopg.connect(_libpq(self.url), autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def rows_for_key(self, key: str) -> int:
        """Business rows the key produced, counted in the target database itself."""
        return int(self.sql("SELECT COUNT(*) FROM orders WHERE idempotency_key = %s", (key,))[0][0])

    def receipt_rows(self) -> int:
        """Rows in the adapter's receipt table, counted with the driver."""
        return int(self.sql("SELECT COUNT(*) FROM ratchet_sql_receipts")[0][0])


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def postgres_server_url() -> str:
    """``postgresql://user@host:port`` of the server the PostgreSQL pass uses (no database)."""
    raw = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    scheme, _, rest = raw.partition("://")
    return "postgresql://" + rest.split("/", 1)[0]


def postgres_target_create() -> str:
    """Create a fresh target database ``ratchet_sqlx_target_<hex>``; returns its URL."""
    name = f"ratchet_sqlx_target_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_server_url() + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{postgres_server_url()}/{name}"


def postgres_target_drop(url: str) -> None:
    """Drop a database made by :func:`postgres_target_create` (closing leftover sessions)."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server_url() + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def child_spec(target: Target, action: Action, key: str, token: int, **extra: Any) -> str:
    return json.dumps({"url": target.url, "options": target.options, "action": action.model_dump(mode="json"),
                       "key": key, "token": token, **extra})


def start_child(target: Target, action: Action, key: str, *, token: int = 1, crash_at: str | None = None,
                start_file: Path | None = None) -> subprocess.Popen[str]:
    """Start ``child_sql.py``: open the adapter, wait for ``start_file`` (if given), execute one action."""
    env = dict(os.environ)
    env.pop("RATCHET_CRASH_AT", None)
    env["PYTHONPATH"] = str(ROOT)
    if crash_at:
        env["RATCHET_CRASH_AT"] = crash_at
    spec = child_spec(target, action, key, token, start_file=str(start_file) if start_file else None)
    return subprocess.Popen([sys.executable, str(CHILD), spec], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run_child(target: Target, action: Action, key: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    """Run a child to the end: ``(returncode, the JSON it printed or {})``."""
    proc = start_child(target, action, key, **kwargs)
    out, err = proc.communicate(timeout=120)
    line = out.strip().splitlines()[-1] if out.strip() else "{}"
    return proc.returncode, json.loads(line) if line.startswith("{") else {"stderr": err}


def write_orders_task(directory: Path, target: Target, order_ids: list[str]) -> Path:
    """``directory/task.toml``: record ``order_ids`` into ``target`` (its ``orders`` table exists) with
    the orders planner (:mod:`tests.adapters.sql.orders_planner`, loaded by dotted path)."""
    directory.mkdir(parents=True, exist_ok=True)
    options = {**OPTIONS, "templates": {"record_order": OPTIONS["templates"]["record_order"]}, "url": target.url}
    orders = [{"order_id": o, "customer": "ada", "card": "card", "amount_cents": 100 * (i + 1)}
              for i, o in enumerate(order_ids)]
    lines = [
        "[task]", 'id = "sql-orders"', 'version = "1"', "",
        "[policy]", 'id = "orders"', 'version = "1"', 'allowed_actions = ["record_order"]', "allowed_paths = []",
        "[policy.budgets]", "proposals = 10", "steps = 10", "wall_seconds = 600", "",
        "[environment]", 'adapter = "sql"', 'target = "."',
        f"options = {toml_value(options)}", "",
        "[planner]", 'kind = "python"', 'entry = "tests.adapters.sql.orders_planner:OrdersPlanner"',
        f"orders = {toml_value(orders)}", "",
        "[verifier]", 'kind = "always"',
    ]
    path = directory / "task.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
