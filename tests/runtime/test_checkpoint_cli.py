"""``manage.py checkpoint show|verify``: what an operator sees when inspecting a run.

DESIGN.md section 4.4: verify exits 0 when the committed checkpoint is valid and
non-zero with the reason otherwise; show prints the envelope and its verification status.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from runtime.checkpoints.protocol import checkpoint_commit
from runtime.core.canonical import canonical_json, digest_bytes
from runtime.models import Checkpoint, HighWaterMark, Run
from tests.factories import scenario_fingerprint
from tests.helpers.procs import run_manage
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db


def show(*args: str) -> str:
    out = StringIO()
    call_command("checkpoint", "show", *args, stdout=out)
    return out.getvalue()


def envelope_json(output: str) -> list[dict]:
    """The JSON documents in ``show`` output (each follows its two ``#`` header lines)."""
    docs, current = [], []
    for line in output.splitlines():
        if line.startswith("#"):
            if current:
                docs.append(json.loads("\n".join(current)))
                current = []
            continue
        current.append(line)
    if current:
        docs.append(json.loads("\n".join(current)))
    return docs


@pytest.fixture
def two_generations(start_run) -> str:
    state, first = start_run()
    checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)
    return state.identity.run_id


@pytest.mark.django_db(transaction=True)
def test_the_operator_sees_verify_exit_zero_for_a_valid_run(two_generations):
    result = run_manage("checkpoint", "verify", two_generations)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"valid: run {two_generations} generation 2"


@pytest.mark.django_db(transaction=True)
def test_the_operator_sees_verify_exit_non_zero_with_the_reason_for_a_tampered_run(two_generations):
    row = Checkpoint.objects.get(run_id=two_generations, generation=2)
    body = json.loads(bytes(row.envelope))
    body["payload"]["cursor"] = 7
    Checkpoint.objects.filter(pk=row.pk).update(envelope=canonical_json(body))

    result = run_manage("checkpoint", "verify", two_generations)

    assert result.returncode != 0
    assert "MAC does not verify" in result.stderr and two_generations in result.stderr


def test_verify_names_a_missing_high_water_mark(two_generations):
    HighWaterMark.objects.filter(run_id=two_generations).delete()

    with pytest.raises(CommandError, match="no high-water mark"):
        call_command("checkpoint", "verify", two_generations)


def test_verify_refuses_a_checkpoint_of_another_scenario_than_the_run_recorded(two_generations):
    Run.objects.filter(run_id=two_generations).update(
        scenario_fingerprint=scenario_fingerprint(task="t2")
    )

    with pytest.raises(CommandError, match="scenario fingerprint"):
        call_command("checkpoint", "verify", two_generations)


def test_verify_refuses_an_older_generation_than_the_hwm(two_generations):
    HighWaterMark.objects.filter(run_id=two_generations).update(generation=3)

    with pytest.raises(CommandError, match="checkpoint"):
        call_command("checkpoint", "verify", two_generations)


def test_show_prints_the_committed_envelope_and_its_status(two_generations):
    output = show(two_generations)

    assert "# status: valid" in output and " committed" in output
    [doc] = envelope_json(output)
    assert (doc["run_id"], doc["generation"], doc["key_id"]) == (
        two_generations,
        2,
        "checkpoint-test-1",
    )
    assert doc["payload"]["cursor"] == 1


def test_show_lists_every_row_of_a_generation_including_orphans(two_generations):
    committed = Checkpoint.objects.get(run_id=two_generations, generation=2)
    body = json.loads(bytes(committed.envelope))
    body["payload"]["cursor"] = 5  # an unsigned edit stored as a second row
    raw = canonical_json(body)
    Checkpoint(
        run_id=two_generations,
        generation=2,
        envelope=raw,
        digest=digest_bytes(raw),
        key_id=committed.key_id,
        schema_version=2,
        lease_version=1,
    ).save()

    output = show(two_generations, "--generation", "2")

    assert output.count("# generation 2") == 2
    assert output.count(" not committed") == 1
    assert "MAC does not verify" in output
    assert [d["payload"]["cursor"] for d in envelope_json(output)] == [1, 5]


def test_show_prints_a_row_that_is_not_json_without_failing(two_generations):
    Checkpoint.objects.filter(run_id=two_generations, generation=1).update(
        envelope=b"\xff\x00garbage"
    )

    output = show(two_generations, "--generation", "1")

    assert "not a JSON object" in output and "not JSON" in output


def test_show_and_verify_reject_an_unknown_run():
    with pytest.raises(CommandError, match="run not found"):
        show("no-such-run")
    with pytest.raises(CommandError, match="run not found"):
        call_command("checkpoint", "verify", "no-such-run")
