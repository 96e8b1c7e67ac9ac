"""HTTP runs through the engine: a scripted orders task against the orders service (DESIGN.md section 5.8).

The orders service runs in its own process on loopback (``tests/adapters/http/support.py``:
:class:`OrdersService`). :func:`write_orders_task` writes a task spec whose scripted planner
places one order per step through ``adapter = "http"``; :func:`http_child_env` gives a child
``manage.py`` the credential, the secret input and the redaction key beside the test database.
Counts always come from the service's own SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.core.idempotency import derive_key
from runtime.models import Run
from runtime.taskspec.writing import toml_value
from tests.adapters.http.support import ACCOUNT, EMAIL_ENV, TOKEN_ENV, OrdersService, options
from tests.helpers.procs import ChildResult, child_env, run_manage

ORDERS_PATH = f"/v1/accounts/{ACCOUNT}/orders"


def order_body(n: int) -> dict[str, Any]:
    """Order ``n``'s body; the customer's e-mail is a secret input, never inline."""
    return {"sku": f"tea-{n:03d}", "quantity": n + 1,
            "customer": {"name": "Ada", "email": {"$secret": "customer_email"}}}


def order_steps(count: int, *, target: str = ORDERS_PATH) -> list[dict[str, Any]]:
    """``count`` generic steps, one ``http_request`` POST per order."""
    return [{"action": "http_request", "target": target, "params": {"method": "POST", "body": order_body(n)}}
            for n in range(count)]


def write_orders_task(directory: Path, service: OrdersService, *, steps: list[dict[str, Any]] | None = None,
                      count: int = 3, approval_risks: tuple[str, ...] = (), **option_overrides: Any) -> Path:
    """Write ``directory/task.toml``: a scripted planner placing ``count`` orders through the HTTP adapter."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [
        "[task]", 'id = "orders-http"', 'version = "1"', "",
        "[policy]", 'id = "orders"', 'version = "1"', 'allowed_actions = ["http_request"]', "allowed_paths = []",
        f"approval_risks = {toml_value(list(approval_risks))}", "",
        "[policy.budgets]", "proposals = 50", "steps = 50", "wall_seconds = 600", "",
        "[environment]", 'adapter = "http"', 'target = "."',
        f"options = {toml_value(options(service.port, **option_overrides))}", "",
        "[planner]", 'kind = "scripted"', "",
    ]
    for step in steps if steps is not None else order_steps(count):
        lines += ["[[planner.steps]]", *(f"{k} = {toml_value(v)}" for k, v in step.items()), ""]
    lines += ["[verifier]", 'kind = "always"', ""]
    path = directory / "task.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def http_child_env(service: OrdersService, **overrides: str | None) -> dict[str, str]:
    """A child's environment: the test database plus the service's credential, the secret input
    and the redaction key (from the service's environment), and ``overrides``."""
    secrets = {name: service.env[name] for name in (TOKEN_ENV, EMAIL_ENV, "RATCHET_REDACTION_KEY")}
    return child_env(**secrets, **overrides)


def run_id_of(child: ChildResult) -> str:
    """The run id a ``manage.py run`` child announced on its first line."""
    first = child.stdout.splitlines()[0] if child.stdout else ""
    if not first.startswith("run "):
        raise AssertionError(f"no run id announced: rc={child.returncode}\n{child.stdout}\n{child.stderr}")
    return first.removeprefix("run ")


def manage_run(task: Path, service: OrdersService, **overrides: str | None) -> ChildResult:
    """``manage.py run TASK`` in a child process with the service's secrets."""
    return run_manage("run", str(task), "--no-progress", env=http_child_env(service, **overrides), timeout=120)


def manage_resume(run_id: str, service: OrdersService, **overrides: str | None) -> ChildResult:
    """``manage.py resume RUN`` in a child process with the service's secrets."""
    return run_manage("resume", run_id, "--wait", "10", "--no-progress", env=http_child_env(service, **overrides),
                      timeout=120)


def run_keys(run_id: str, count: int) -> list[str]:
    """The deterministic idempotency keys of the run's ``count`` writes (cursor 0..count-1, epoch 0)."""
    return [derive_key(run_id=run_id, cursor=c, replan_epoch=0) for c in range(count)]


def run_phase(run_id: str) -> tuple[str, str]:
    """``(phase, stop_reason)`` of the run as the database holds it."""
    run = Run.objects.get(run_id=run_id)
    return run.phase, run.stop_reason
