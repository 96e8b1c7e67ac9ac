"""Browser stories: headless Chromium (Debian's ``chromium``, driven by Playwright) against a live
web server and a real Celery worker, both child processes on the test database.

The stack, started once for the browser stories (package scope) and stopped after them, so its
worker never drives another test's runs:

* ``manage.py runserver 127.0.0.1:<free port> --noreload --insecure`` (the dashboard);
* ``manage.py worker --pool solo`` with the sweeper embedded, on an embedded SQLite broker file
  in a temporary directory, so the runs a test makes live again (an approval, a replan) are
  driven by a real worker process, exactly as in production;
* keys for the three trust roots, given to the children and set in each story's process.

Both children are ours and are stopped by pid at the end. Without ``chromium`` on ``PATH`` the
stories are skipped with the reason, except under ``CI=true``, where that is a failure (the CI
script installs it). Every page a story visits is saved as a screenshot under
``tests/artifacts/browser/`` (gitignored).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.core.signing import TrustRoot
from tests.browser.support import PASSWORD
from tests.helpers.keys import make_test_key
from tests.helpers.procs import MANAGE, ROOT, child_env

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each story file runs in one of the two passes of ``tests/run``, alternately by name: a story
    clicks through views and services whose own tests run on both databases, so running every
    story twice bought no coverage for minutes of the CI budget. Under ``RATCHET_BROWSER_BOTH=1``
    every story runs in both passes."""
    if os.environ.get("RATCHET_BROWSER_BOTH") == "1":
        return
    here = Path(__file__).parent
    stories = sorted({item.path for item in items if item.path.parent == here})
    on_postgres = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
    mine = set(stories[int(on_postgres)::2])
    skip = pytest.mark.skip(reason="browser stories alternate between the SQLite and PostgreSQL passes "
                                   "(RATCHET_BROWSER_BOTH=1 runs them in both)")
    for item in items:
        if item.path.parent == here and item.path not in mine:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Debian's Chromium; skipped with a reason when missing, a failure under ``CI=true``."""
    path = shutil.which("chromium")
    if path is None:
        reason = "Debian's chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return path


@pytest.fixture
def browser(chromium_path: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Headless Chromium for one story. Started per test and stopped after it: while Playwright's
    sync API runs, its event loop sits on this thread and Django refuses ORM calls from it, so
    the story may use the ORM only with the guard relaxed, and never after the browser is gone.
    """
    from django.db import connections
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()
        # With the loop running, the ORM used connections held per async context, not the
        # thread's: close them, or the test database cannot be dropped at the end.
        connections.close_all()


@pytest.fixture(scope="package")
def stack_keys() -> dict[str, str]:
    """``RATCHET_<ROOT>_KEYS`` values for every trust root, shared by the stack's children and
    (through :func:`story_keys`) each story's own process."""
    return {
        f"RATCHET_{root.value.upper()}_KEYS": make_test_key(root, f"{root.value}-browser").spec
        for root in TrustRoot
    }


@pytest.fixture(autouse=True)
def story_keys(stack_keys: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in stack_keys.items():
        monkeypatch.setenv(name, value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(predicate, *, timeout: float, what: str, procs: list[subprocess.Popen]) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"{what}: a child exited with {proc.returncode} ({proc.args})")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Stack:
    """The live web server's base URL and the worker's log file."""

    def __init__(self, base_url: str, worker_log: Path) -> None:
        self.base_url = base_url
        self.worker_log = worker_log


@pytest.fixture(scope="package")
def stack(django_db_setup, django_db_blocker, stack_keys,  # type: ignore[no-untyped-def]
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Start the web server and the worker on the test database; stop them by pid afterwards."""
    logs = tmp_path_factory.mktemp("stack")
    port = _free_port()
    with django_db_blocker.unblock():
        env = child_env(
            CELERY_BROKER_URL=f"sqla+sqlite:///{logs / 'broker.sqlite3'}",
            RATCHET_SWEEP_SECONDS="1",
            RATCHET_STEPS_PER_TASK="4",
            RATCHET_WORKER_ID=f"browser-worker-{os.getpid()}",
            **stack_keys,
        )
    procs: list[subprocess.Popen] = []
    handles = []

    def start(name: str, *args: str) -> Path:
        log = logs / f"{name}.log"
        handles.append(log.open("w"))
        procs.append(subprocess.Popen([sys.executable, str(MANAGE), *args], env=env, cwd=ROOT,
                                      stdout=handles[-1], stderr=subprocess.STDOUT))
        return log

    def web_up() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        # The worker first: it declares the broker's queue before the web server publishes to it
        # (two processes creating the SQLite broker's queue row at once can collide).
        worker_log = start("worker", "worker", "--pool", "solo", "--concurrency", "1",
                           "--loglevel", "info", "--hostname", f"browser-{os.getpid()}@localhost")
        _wait(lambda: " ready." in worker_log.read_text(errors="replace"), timeout=60,
              what="the Celery worker", procs=procs)
        start("web", "runserver", f"127.0.0.1:{port}", "--noreload", "--insecure")
        _wait(web_up, timeout=60, what="the web server", procs=procs)
        yield Stack(f"http://127.0.0.1:{port}", worker_log)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for handle in handles:
            handle.close()


@pytest.fixture
def users(transactional_db, django_user_model) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The three roles and one person in each (default password hasher: the server checks it)."""
    from django.contrib.auth.models import Group

    from review.roles import roles_sync

    roles_sync()
    made = {}
    for role in ("operator", "reviewer", "admin"):
        user = django_user_model.objects.create_user(username=f"{role}-ann", password=PASSWORD)
        user.groups.add(Group.objects.get(name=role))
        made[role] = user
    return made
