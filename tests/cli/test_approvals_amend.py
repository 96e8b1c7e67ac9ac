"""``manage.py approvals amend``: show, preview and amend a waiting write headless (DESIGN.md section 6.13)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from review.forms_amend import AmendForm
from runtime.decisions.approvals import approvals_waiting
from runtime.engine import run_advance
from runtime.models import TraceEvent
from tests.review.stories import approval_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(tmp_path) -> str:  # type: ignore[no-untyped-def]
    return approval_run(tmp_path)


def _amend(*args: str) -> str:
    out = StringIO()
    call_command("approvals", "amend", *args, stdout=out)
    return out.getvalue()


def test_it_shows_the_arguments_previews_and_amends_with_set(waiting, tmp_path) -> None:
    shown = _amend(waiting, "--show").splitlines()
    head = json.loads(shown[0])
    assert head["arguments"]["content"] == "max_orders = 3\nmax_refunds = 1\n" and head["changed"] is False
    preview = _amend(waiting, "--dry-run", "--set", "content=max_orders = 2\n")
    assert "+max_orders = 2" in preview and json.loads(preview.splitlines()[0])["changed"] is True
    assert not TraceEvent.objects.filter(run_id=waiting, event_type="intent.amended").exists()

    [item] = approvals_waiting(run_ids=[waiting])
    done = _amend(waiting, "--approver", "olivia", "--fingerprint", item.environment_fingerprint,
                  "--intent", head["proposed_intent_digest"], "--set", "content=max_orders = 2\n", "--note", "finance")

    assert done.startswith(f"amended: run {waiting} is now pending")
    assert run_advance(run_id=waiting, worker="cli").phase == "completed"
    assert (tmp_path / "ws" / "limits.toml").read_text() == "max_orders = 2\n"


def test_it_takes_the_arguments_from_a_json_file(waiting, tmp_path) -> None:
    [item] = approvals_waiting(run_ids=[waiting])
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"path": "limits.toml", "content": "max_orders = 1\n", "executable": False}))
    done = _amend(waiting, "--approver", "olivia", "--fingerprint", item.environment_fingerprint,
                  "--intent", item.intent_digest, "--json", str(path))
    assert done.startswith("amended:")
    assert run_advance(run_id=waiting, worker="cli").phase == "completed"
    assert (tmp_path / "ws" / "limits.toml").read_text() == "max_orders = 1\n"


def test_it_refuses_an_amendment_outside_the_policy(waiting) -> None:
    [item] = approvals_waiting(run_ids=[waiting])
    with pytest.raises(CommandError, match="not a valid write_file"):
        _amend(waiting, "--approver", "olivia", "--fingerprint", item.environment_fingerprint,
               "--intent", item.intent_digest, "--set", "path=.git/hooks/pre-commit")
    assert approvals_waiting(run_ids=[waiting])[0].intent_digest == item.intent_digest


def test_it_needs_the_intent_the_approver_reviewed_and_refuses_another(waiting) -> None:
    [item] = approvals_waiting(run_ids=[waiting])
    common = ("--approver", "olivia", "--fingerprint", item.environment_fingerprint, "--set", "content=x\n")
    with pytest.raises(CommandError, match="--intent missing"):
        _amend(waiting, *common)
    with pytest.raises(CommandError, match="not the one you amended"):
        _amend(waiting, *common, "--intent", "sha256:" + "0" * 64)
    assert not TraceEvent.objects.filter(run_id=waiting, event_type="intent.amended").exists()
    assert approvals_waiting(run_ids=[waiting])[0].intent_digest == item.intent_digest


@pytest.mark.parametrize(("text", "reason"), [("[1, 2]", "must be a JSON object"), ("{oops", "not valid JSON"),
                                              ("[" * 200 + "]" * 200, "not valid JSON")])
def test_it_reads_json_arguments_as_the_dashboard_form_does(waiting, tmp_path, text, reason) -> None:
    path = tmp_path / "args.json"
    path.write_text(text)
    [item] = approvals_waiting(run_ids=[waiting])
    with pytest.raises(CommandError, match=reason):
        _amend(waiting, "--approver", "olivia", "--fingerprint", item.environment_fingerprint,
               "--intent", item.intent_digest, "--json", str(path))
    form = AmendForm({"arguments": text, "proposed_intent_digest": item.intent_digest, "step": "preview"})
    assert not form.is_valid() and reason in form.errors["arguments"][0], "the same reading, the same words"
