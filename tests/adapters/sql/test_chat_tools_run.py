"""Story: a model records orders through the SQL adapter, via the chat-tools planner (DESIGN.md sections 5.11, 6.7).

The fake model server (its own process, loopback) is offered one tool per SQL template the policy
allows, with the template's parameter schema (a secret parameter as its ``{"$secret": NAME}``
placeholder); a template the policy leaves out is not offered. The model never writes SQL: it
names a template and gives values. Counted in the target database itself (SQLite, and PostgreSQL
in its pass): one business row and one receipt per key, also after a SIGKILL after the target's
commit and a resume in another process, with the model asked once per committed step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from runtime.engine import run_advance, run_start
from runtime.errors import PlannerError
from runtime.models import Run
from runtime.planners.chat_tools.tools import toolset_for
from tests.adapters.sql.support import OPTIONS, Target, toml_value
from tests.engine.support import trace_events
from tests.helpers.procs import KILLED, child_env, run_manage
from tests.planners.chat_tools.support import chat_planner_lines

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "Record orders o-1 and o-2 for ada (card: the card input), then finish."


def record(order_id: str, amount: int) -> dict[str, Any]:
    """A scripted reply: the model calls the ``record_order`` template."""
    return {"tool": "record_order", "arguments": {"params": {
        "order_id": order_id, "key": order_id, "customer": "ada", "card": {"$secret": "card"},
        "amount_cents": amount}}}


STEPS = [[record("o-1", 100)], [record("o-2", 200)], [{"finish": "two orders recorded"}]]


def write_chat_sql_task(directory: Path, target: Target, *, base_url: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [
        "[task]", 'id = "sql-chat"', 'version = "1"', "",
        "[policy]", 'id = "orders"', 'version = "1"', 'allowed_actions = ["record_order"]', "allowed_paths = []",
        "[policy.budgets]", "proposals = 10", "steps = 10", "wall_seconds = 600", "",
        "[environment]", 'adapter = "sql"', 'target = "."', f"options = {toml_value({**OPTIONS, 'url': target.url})}",
        "",
        *chat_planner_lines(base_url=base_url, task=TASK, risks={"record_order": "low"}), "",
        "[verifier]", 'kind = "always"',
    ]
    path = directory / "task.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _rows_per_key(target: Target) -> dict[str, int]:
    rows = target.sql("SELECT idempotency_key, COUNT(*) FROM orders GROUP BY idempotency_key")
    return {**{key: int(count) for key, count in rows}, "receipts": target.receipt_rows()}


def test_it_offers_each_allowed_template_with_its_parameter_schema() -> None:
    toolset = toolset_for("sql", options=OPTIONS, allowed=("record_order",))

    assert [t["function"]["name"] for t in toolset.tools] == ["record_order", "finish"]
    params = toolset.tools[0]["function"]["parameters"]["properties"]["params"]
    assert params["properties"]["amount_cents"]["maximum"] == 1_000_000
    assert params["properties"]["card"]["properties"]["$secret"]["enum"] == ["bad_card", "card", "other_card"]
    with pytest.raises(PlannerError, match="none of adapter 'sql'"):
        toolset_for("sql", options=OPTIONS, allowed=("drop_everything",))


def test_it_records_the_orders_the_model_proposes(tmp_path: Path, target: Target, fake_model) -> None:
    server = fake_model(STEPS)
    run_id = run_start(spec_path=write_chat_sql_task(tmp_path, target, base_url=server.base_url))

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("completed", "verified")
    assert _rows_per_key(target) == {"o-1": 1, "o-2": 1, "receipts": 2}
    assert server.requests_per_step() == {0: 1, 1: 1, 2: 1}


def test_it_refuses_a_template_the_policy_did_not_offer(tmp_path: Path, target: Target, fake_model) -> None:
    server = fake_model([[{"tool": "cancel_order", "arguments": {"params": {"order_id": "o-1"}}}]])
    run_id = run_start(spec_path=write_chat_sql_task(tmp_path, target, base_url=server.base_url))

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "planner_failed")
    assert _rows_per_key(target) == {"receipts": 0}
    assert [e["error"] for e in trace_events(run_id, "planner.model_error")] == ["UnknownToolError"] * 2


def test_it_records_each_order_once_after_a_kill_after_the_commit(tmp_path: Path, target: Target,
                                                                  fake_model) -> None:
    server = fake_model(STEPS)
    task = write_chat_sql_task(tmp_path, target, base_url=server.base_url)

    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT="sql.after_commit:2", RATCHET_LEASE_SECONDS="3"))
    assert killed.returncode == KILLED, (killed.returncode, killed.stdout, killed.stderr)
    run_id = re.search(r"run ([0-9a-f]{32})", killed.stdout + killed.stderr).group(1)
    resumed = run_manage("resume", run_id, "--wait", "20", "--no-progress")

    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert Run.objects.get(run_id=run_id).phase == "completed"
    assert _rows_per_key(target) == {"o-1": 1, "o-2": 1, "receipts": 2}
    assert server.requests_per_step() == {0: 1, 1: 1, 2: 1}
