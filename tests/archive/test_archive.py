"""Archiving finished runs: the bundle goes to storage, the rows go, the record stays and the
bundle verifies with public keys only; live runs are untouched; a pass killed midway (real
SIGKILL of a real process) leaves each run archived or intact and a second pass finishes
(DESIGN.md section 4.11)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from runtime.archive.bundle_store import archive_storage
from runtime.archive.runs import archive_pass
from runtime.archive.selection import ArchiveSelection
from runtime.archive.verify import archived_bundle_findings
from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance
from runtime.models import Attachment, HighWaterMark, Run
from tests.archive.support import finished_runs, held_rows, live_run, state_of, waiting_item
from tests.helpers.procs import KILLED, child_env, run_manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TINY_AGE = "0.001s"


@pytest.fixture
def public_keys(tmp_path, ratchet_keys):
    out = tmp_path / "public-keys.json"
    call_command("keys", "export-public", "--out", str(out))
    return out


def test_a_dry_run_lists_what_would_go_and_changes_nothing(tmp_path, ratchet_keys, capsys):
    done = finished_runs(tmp_path, 3)
    live = live_run(tmp_path)
    before = {run_id: held_rows(run_id) for run_id in [*done, live]}
    call_command("archive", "--older-than", TINY_AGE)
    out = capsys.readouterr().out
    assert "would archive 3 run(s)" in out and "dry run: nothing changed" in out
    assert all(run_id in out for run_id in done) and live not in out
    assert {run_id: held_rows(run_id) for run_id in [*done, live]} == before
    assert not Run.objects.filter(archived_at__isnull=False).exists()


def test_archived_runs_lose_their_rows_keep_a_record_and_verify_offline(tmp_path, ratchet_keys, public_keys):
    done = finished_runs(tmp_path, 4)
    live = live_run(tmp_path)
    live_before = held_rows(live)
    hwm_before = dict(HighWaterMark.objects.using("hwm").values_list("run_id", "generation"))
    outcome = archive_pass(selection=ArchiveSelection(older_than=0.001), apply=True)
    assert sorted(outcome.archived) == sorted(done) and not outcome.skipped
    assert outcome.rows["Checkpoint"] > 0 and outcome.rows["TraceEvent"] > 0
    for run_id in done:
        assert state_of(run_id) == "archived"
        run = Run.objects.get(run_id=run_id)
        assert run.phase == "completed" and archive_storage().exists(run.archive_location)
        assert archived_bundle_findings(run_id=run_id, public_keys=public_keys) == []
    # The mark never moves back: every run keeps its high-water mark row.
    assert dict(HighWaterMark.objects.using("hwm").values_list("run_id", "generation")) == hwm_before
    # The live run is untouched and completes.
    assert held_rows(live) == live_before and state_of(live) == "intact"
    item = waiting_item(live)
    approval_grant(run_id=live, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    assert run_advance(run_id=live, worker="w-live").phase == "completed"
    # A second pass finds nothing more to do.
    again = archive_pass(selection=ArchiveSelection(older_than=0.001), apply=True)
    assert again.candidates == [live] and list(again.archived) == [live]


def test_a_tampered_archived_bundle_is_caught_by_its_digest(tmp_path, ratchet_keys, public_keys):
    from runtime.errors import ArchiveStorageError

    [run_id] = finished_runs(tmp_path, 1)
    archive_pass(selection=ArchiveSelection(older_than=0.001), apply=True)
    name = Run.objects.get(run_id=run_id).archive_location
    path = archive_storage().path(name)
    data = open(path, "rb").read()
    with open(path, "wb") as handle:
        handle.write(data.replace(b'"completed"', b'"cancelled"', 1))
    with pytest.raises(ArchiveStorageError):
        archived_bundle_findings(run_id=run_id, public_keys=public_keys)


def test_the_runs_list_and_run_page_still_show_archived_runs(tmp_path, ratchet_keys, django_user_model):
    done = finished_runs(tmp_path, 2)
    archive_pass(selection=ArchiveSelection(older_than=0.001), apply=True)
    admin = django_user_model.objects.create_superuser("admin", "admin@example.invalid", "pw-archive-1")
    client = Client()
    client.force_login(admin)
    page = client.get("/")
    assert page.status_code == 200
    text = page.content.decode()
    assert all(run_id in text for run_id in done) and "archived" in text
    detail = client.get(f"/runs/{done[0]}/")
    assert detail.status_code == 200 and "This run is archived" in detail.content.decode()


def test_only_attachments_no_remaining_run_names_are_swept(tmp_path, ratchet_keys, settings):
    settings.RATCHET_ARCHIVE_ATTACHMENT_GRACE_SECONDS = 0.001
    done = finished_runs(tmp_path, 2)
    live = live_run(tmp_path)
    before = Attachment.objects.count()
    outcome = archive_pass(selection=ArchiveSelection(older_than=0.001), apply=True)
    assert outcome.attachments_removed > 0 and Attachment.objects.count() == before - outcome.attachments_removed
    # The live run still reads every attachment it names and completes.
    item = waiting_item(live)
    approval_grant(run_id=live, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    assert run_advance(run_id=live, worker="w-live").phase == "completed"
    assert all(state_of(run_id) == "archived" for run_id in done)


def test_a_pass_killed_at_either_crash_point_leaves_each_run_whole_and_a_rerun_finishes(tmp_path, ratchet_keys,
                                                                                      public_keys):
    done = finished_runs(tmp_path, 4)
    # Killed after the second run's bundle is stored, then inside the next pass's second
    # transaction: each time one run more is archived and none is half.
    for point, archived in (("archive.bundle_stored:2", 1), ("archive.rows_removed:2", 2)):
        killed = run_manage("archive", "--older-than", TINY_AGE, "--apply", env=child_env(RATCHET_CRASH_AT=point))
        assert killed.returncode == KILLED, killed.stderr[-800:]
        states = [state_of(run_id) for run_id in done]
        assert "HALF" not in states and states.count("archived") == archived, (point, states)
    call_command("archive", "--older-than", TINY_AGE, "--apply")
    assert [state_of(run_id) for run_id in done] == ["archived"] * 4
    assert all(archived_bundle_findings(run_id=r, public_keys=public_keys) == [] for r in done)


def test_a_pass_sigkilled_from_outside_midway_leaves_no_half_run(tmp_path, ratchet_keys, public_keys):
    import signal
    import subprocess
    import sys

    from tests.helpers.procs import MANAGE, ROOT

    done = finished_runs(tmp_path, 20, writes=1)
    live = live_run(tmp_path)
    proc = subprocess.Popen([sys.executable, str(MANAGE), "archive", "--older-than", TINY_AGE, "--apply"],
                            env=child_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: Run.objects.filter(archived_at__isnull=False).count() >= 3, timeout=120,
                 what="the first archived runs")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()
    states = [state_of(run_id) for run_id in done]
    assert "HALF" not in states, states
    assert state_of(live) == "intact"
    call_command("archive", "--older-than", TINY_AGE, "--apply")
    assert [state_of(run_id) for run_id in done] == ["archived"] * 20
    assert all(archived_bundle_findings(run_id=r, public_keys=public_keys) == [] for r in done)
    assert state_of(live) == "intact"


def test_an_archived_run_is_refused_by_resume_and_dropped_by_a_worker_without_a_trace(tmp_path, ratchet_keys):
    from runtime.errors import DerivedRowMismatchError, RunArchivedError
    from runtime.models import TraceEvent
    from runtime.workers.tasks import advance_run_once

    [archived] = finished_runs(tmp_path / "first", 1)
    archive_pass(selection=ArchiveSelection(older_than=0.001), apply=True)
    [edited] = finished_runs(tmp_path / "second", 1)
    location = Run.objects.get(run_id=archived).archive_location

    with pytest.raises(RunArchivedError) as refused:
        run_advance(run_id=archived, worker="w")
    assert refused.value.context["location"] == location
    assert advance_run_once(run_id=archived, generation=None, worker="w") == "not-live"
    assert not TraceEvent.objects.filter(run_id=archived).exists()

    # A row that claims to be archived while its checkpoints are still stored was edited.
    Run.objects.filter(run_id=edited).update(archived_at=Run.objects.get(run_id=archived).archived_at)
    with pytest.raises(DerivedRowMismatchError, match="says archived"):
        run_advance(run_id=edited, worker="w")
