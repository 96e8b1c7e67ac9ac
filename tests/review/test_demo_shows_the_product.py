"""The demo shows what the product does, not only that it runs: a receipt conflict whose file
content differs (the case page's content diff), a real SIGKILLed run recovered by another worker
(Health's recovery figures), and an address passkeys accept (DESIGN.md sections 6.6 and 6.9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from review.management.commands.demo import demo_url
from review.passkeys import passkey_origin
from runtime.demo.scenarios import OTHER_CALLER_LINE
from runtime.demo.seeding import demo_seed_scenario
from runtime.demo.services import DemoServices
from runtime.evidence.attachments import attachment_get
from runtime.models import ReviewCase, Run, TraceEvent
from runtime.observability.stats import recovery_stats
from tests.helpers.procs import child_env
from tests.planners.gitrepo import git

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real repository of seven commits, each rewriting README.md and adding a note."""
    repo = tmp_path_factory.mktemp("demo-product") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for day in range(1, 8):
        (repo / "notes").mkdir(exist_ok=True)
        (repo / f"notes/day-{day}.md").write_text(f"Notes of day {day}\n")
        (repo / "README.md").write_text(f"# Demo source\n\nUpdated on day {day}.\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"Day {day}", GIT_AUTHOR_NAME="Ada", GIT_AUTHOR_EMAIL="ada@example.org",
            GIT_AUTHOR_DATE=f"2024-02-{day:02d}T09:00:00+00:00")
    return repo


def _seed(name: str, source: Path, tmp_path: Path) -> str:
    workdir = tmp_path / "demo"
    return demo_seed_scenario(name=name, source=source, workdir=workdir, services=DemoServices(workdir=workdir))


def test_the_seeded_content_conflict_shows_both_sides_of_a_file(source, tmp_path, ratchet_keys,
                                                                client_for, personas) -> None:
    run_id = _seed("receipt_conflict", source, tmp_path)

    case = ReviewCase.objects.get(run_id=run_id)
    written = [c for c in case.pending["action"]["params"]["changes"] if c["op"] == "write"]
    planned_line = attachment_get(digest=written[0]["content"]).decode().splitlines()[0]
    html = client_for("reviewer").get(reverse("review:case", args=[case.case_id])).content.decode()
    assert f'<span class="diff-del">-{OTHER_CALLER_LINE.strip()}</span>' in html, "the landed side"
    assert f'<span class="diff-add">+{planned_line}</span>' in html, "the planned side"
    assert "differs" in html


def test_the_seeded_crash_is_a_real_kill_and_a_recovery_health_counts(
        source, tmp_path, ratchet_keys, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in child_env().items():  # the crashing child must reach the test database
        if name in ("DATABASE_URL", "RATCHET_HWM_DATABASE_URL", "RATCHET_VAR_DIR", "PYTHONPATH"):
            monkeypatch.setenv(name, value)

    run_id = _seed("recovered", source, tmp_path)

    assert Run.objects.get(run_id=run_id).phase == "completed"
    events = list(TraceEvent.objects.filter(run_id=run_id).values_list("event_type", flat=True))
    assert "recovery.started" in events and "recovery.succeeded" in events
    stats = recovery_stats()
    assert stats.succeeded >= 1 and stats.duration_median_seconds is not None


def test_the_printed_address_is_a_host_name_passkeys_accept(db, settings) -> None:
    settings.RATCHET_PASSKEY_ORIGIN = settings.RATCHET_PASSKEY_RP_ID = settings.RATCHET_DASHBOARD_URL = ""
    assert demo_url(port=8000) == "http://localhost:8000/"
    assert passkey_origin(request_origin="http://localhost:8000") == ("http://localhost:8000", "localhost")
    response = Client(HTTP_HOST="localhost:8000").get(reverse("login"))
    assert response.status_code == 200, "localhost is an allowed host"
