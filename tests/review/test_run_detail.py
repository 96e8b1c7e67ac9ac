"""Run detail: phase, stop reason, lease, checkpoint generations and their verification, pending
intent, receipts, environment versions, attachments and a trace timeline whose chain verifies."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runtime.core.canonical import digest_bytes
from runtime.core.envelope import envelope_digest, seal
from runtime.evidence.attachments import attachment_put
from runtime.models import Checkpoint, HighWaterMark, Phase, TraceEvent
from tests.factories import make_state
from tests.review.rows import build_run, pending_state


@pytest.fixture
def run(checkpoint_keyring, personas):  # type: ignore[no-untyped-def]
    shot = attachment_put(data=b"\x89PNG fake screenshot", content_type="image/png")
    state = pending_state(make_state(run_id="run-detail", env_version="v7"), attachments=[shot])
    return build_run(
        checkpoint_keyring,
        run_id="run-detail",
        phase=Phase.PENDING.value,
        state=state,
        generations=3,
        events=4,
        owner_worker="worker-42",
        environment_version="v7",
        event_type="action.proposed",
    )


def _page(client_for, persona: str = "operator", **params: str) -> str:  # type: ignore[no-untyped-def]
    query = "&".join(f"{k}={v}" for k, v in params.items())
    response = client_for(persona).get(
        reverse("review:run", args=["run-detail"]) + ("?" + query if query else "")
    )
    assert response.status_code == 200
    return response.content.decode()


def test_it_shows_phase_lease_and_the_verified_committed_checkpoint(client_for, run) -> None:
    page = _page(client_for)
    assert 'class="badge phase-pending">pending<' in page
    assert "worker-42" in page and 'tone-ok" title="judged by the database clock">current<' in page
    assert 'tone-ok" title="MAC, schema' in page
    assert "test-k1" in page, "the id of the signing key is shown (never the key)"


def test_it_shows_the_pending_intent_receipts_environment_and_attachments(client_for, run) -> None:
    page = _page(client_for)
    assert "notes/next.txt" in page and "high risk" in page and "key-next-0002" in page
    assert "rcpt-0001" in page and "wrote notes/done.txt (5 bytes)" in page
    assert re.search(r"<dt>Version</dt><dd[^>]*>v7</dd>", page)
    shot = digest_bytes(b"\x89PNG fake screenshot")
    assert f'href="/attachments/{shot}/"' in page and "image/png" in page


def test_it_lists_every_checkpoint_generation_with_its_verification(client_for, run) -> None:
    page = _page(client_for)
    section = page[page.index('id="checkpoints"') : page.index('id="timeline"')]
    assert section.count(">valid<") == 3
    assert section.count(">committed<") == 1 and section.count(">earlier<") == 2


def test_it_shows_the_trace_timeline_and_that_its_hash_chain_verifies(client_for, run) -> None:
    assert ">hash chain not checked<" in _page(client_for), "a page view does not re-hash"
    page = _page(client_for, verify="chain")
    assert ">hash chain verifies<" in page
    assert ">hash chain verifies<" in _page(client_for), "the verdict is kept for this head"
    assert page.count('class="event-type mono">action.proposed<') == 4


def test_it_says_when_the_hash_chain_is_broken_and_where(client_for, run) -> None:
    TraceEvent.objects.filter(run_id="run-detail", seq=2).update(payload={"step": "edited"})
    page = _page(client_for, verify="chain")
    assert ">hash chain broken<" in page
    assert "From seq 2 on" in page and "was altered" in page


def test_it_shows_nothing_from_a_committed_checkpoint_that_does_not_verify(client_for, run) -> None:
    row = Checkpoint.objects.get(run_id="run-detail", generation=3)
    forged = bytes(row.envelope).replace(b"notes/next.txt", b"notes/evil.txt")
    Checkpoint.objects.filter(pk=row.pk).update(envelope=forged)
    HighWaterMark.objects.filter(run_id="run-detail").update(checkpoint_digest=digest_bytes(forged))
    page = _page(client_for)
    assert "does not verify; nothing from its payload is shown" in page
    assert "notes/evil.txt" not in page and "notes/next.txt" not in page
    section = page[page.index('id="checkpoints"') : page.index('id="timeline"')]
    assert section.count(">valid<") == 2 and ">invalid<" in section


def test_it_refuses_a_validly_signed_but_stale_checkpoint_as_the_committed_one(
    client_for, run, checkpoint_keyring
) -> None:
    """DESIGN.md section 7, "valid HMAC taken as latest": generation 2's authentic bytes put where
    the committed generation 3 should be are refused, on the detail page and in the list."""
    older = Checkpoint.objects.get(run_id="run-detail", generation=2)
    Checkpoint.objects.filter(run_id="run-detail", generation=3).update(
        envelope=bytes(older.envelope)
    )
    page = _page(client_for)
    assert (
        "does not verify" in page
        and "validly signed checkpoint is stored where the committed one" in page
    )
    listing = client_for("operator").get(reverse("review:runs")).content.decode()
    assert ">bytes altered<" in listing


def _poller(html: str) -> str:
    return re.search(r'<div id="poller"[^>]*>', html).group(0)


def test_it_polls_every_region_together_and_answers_204_when_nothing_changed(
    client_for, run
) -> None:
    client = client_for("operator")
    url = reverse("review:run", args=["run-detail"])
    poller = _poller(client.get(url).content.decode())
    assert "data-poll" in poller and 'hx-trigger="every 2s, ratchet:visible"' in poller
    token = re.search(r'"since": "([0-9a-f]+)"', poller).group(1)
    unchanged = client.get(url, {"since": token}, headers={"HX-Request": "true"})
    assert unchanged.status_code == 204 and unchanged.content == b""
    changed = client.get(url, {"since": "old"}, headers={"HX-Request": "true"}).content.decode()
    assert changed.lstrip().startswith('<div id="poller"')
    for region in ("run-status", "committed", "checkpoints", "timeline"):
        assert re.search(rf'<section id="{region}"[^>]*hx-swap-oob="true"', changed), region
    assert 'id="nav-approvals-count"' in changed
    assert '<div id="live-announcer" hx-swap-oob="innerHTML">Run updated: pending' in changed


def test_it_pages_through_a_long_trace(client_for, checkpoint_keyring, personas) -> None:
    build_run(checkpoint_keyring, run_id="run-long", events=120)
    client = client_for("operator")
    url = reverse("review:run", args=["run-long"])
    page = client.get(url, headers={"HX-Request": "true", "HX-Target": "timeline"}).content.decode()
    assert ">#120<" in page and ">#71<" in page and ">#70<" not in page
    assert 'href="?events_page=2" hx-get="?events_page=2"' in page
    older = client.get(url + "?events_page=3&verify=chain").content.decode()
    assert ">#20<" in older and ">#1<" in older and ">hash chain verifies<" in older


def test_a_finished_run_does_not_poll(client_for, checkpoint_keyring, personas) -> None:
    build_run(
        checkpoint_keyring,
        run_id="run-over",
        phase=Phase.FAILED.value,
        stop_reason="aborted_by_reviewer",
    )
    page = client_for("operator").get(reverse("review:run", args=["run-over"])).content.decode()
    assert "data-poll" not in _poller(page) and "hx-trigger" not in _poller(page)
    assert "aborted_by_reviewer" in page


def test_it_shows_a_run_that_has_no_checkpoint_yet(
    client_for, checkpoint_keyring, personas
) -> None:
    run = build_run(checkpoint_keyring, run_id="run-new", generations=0, events=0)
    HighWaterMark.objects.filter(run_id=run.run_id).update(generation=0, checkpoint_digest="")
    page = client_for("operator").get(reverse("review:run", args=["run-new"])).content.decode()
    assert "no committed checkpoint yet" in page
    assert "No checkpoint stored." in page and "No trace events." in page


def test_the_trace_link_is_only_offered_to_admins(client_for, run) -> None:
    assert "Open in trace evidence" not in _page(client_for, "operator")
    assert "Open in trace evidence" in _page(client_for, "admin")


def test_it_downloads_an_attachment_as_a_sandboxed_file(client_for, run) -> None:
    shot = digest_bytes(b"\x89PNG fake screenshot")
    response = client_for("reviewer").get(reverse("review:attachment", args=[shot]))
    assert response.status_code == 200
    assert response.content == b"\x89PNG fake screenshot"
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    missing = "sha256:" + "0" * 64
    assert (
        client_for("reviewer").get(reverse("review:attachment", args=[missing])).status_code == 404
    )


def test_it_marks_a_checkpoint_left_by_a_crash_before_the_hwm_cas_as_uncommitted(
    client_for, run, checkpoint_keyring
) -> None:
    """DESIGN.md section 4: a crash between writing g+1 and advancing the HWM leaves g committed."""
    state = pending_state(make_state(run_id="run-detail", env_version="v7"))
    raw, envelope = seal(state, generation=4, keyring=checkpoint_keyring)
    Checkpoint.objects.create(
        run=run,
        generation=4,
        envelope=raw,
        digest=envelope_digest(raw),
        key_id=envelope.key_id,
        schema_version=envelope.schema_version,
        lease_version=1,
    )
    page = _page(client_for)
    section = page[page.index('id="checkpoints"') : page.index('id="timeline"')]
    assert section.count(">uncommitted<") == 1 and section.count(">committed<") == 1
    assert "<dt>Generation</dt><dd>3</dd>" in page, "generation 3 is still the committed one"
