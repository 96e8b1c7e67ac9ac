"""Restore fails closed: an attacker (or a bad disk) edits what is stored; restore must refuse.

DESIGN.md section 4 (Authenticity, Freshness) and section 7 ("valid HMAC taken as latest"). These
tests work on stored rows; the pure envelope functions are tested with the core.
"""

from __future__ import annotations

import json
import random

import pytest
from django.db import connection, connections

from runtime.checkpoints.checks import checkpoint_restore_offered
from runtime.checkpoints.protocol import checkpoint_commit, checkpoint_restore
from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import VersionSet
from runtime.core.signing import TrustRoot
from runtime.database.routers import hwm_alias
from runtime.errors import (
    BadSignatureError,
    CheckpointCorruptError,
    CheckpointNotFoundError,
    CheckpointSchemaError,
    HighWaterMarkMissingError,
    IdentityMismatchError,
    RollbackError,
    ScenarioMismatchError,
    UnknownKeyError,
    VersionMismatchError,
)
from runtime.keys import keyring_for
from runtime.models import Checkpoint, HighWaterMark
from tests.factories import scenario_fingerprint
from tests.helpers.keys import make_test_key
from tests.helpers.procs import child_env, run_worker
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db

FP = scenario_fingerprint()


def restore(run_id: str, **kwargs):
    return checkpoint_restore(
        run_id=run_id, scenario_fingerprint=kwargs.pop("scenario", FP), **kwargs
    )


def committed_row(run_id: str) -> Checkpoint:
    hwm = HighWaterMark.objects.get(run_id=run_id)
    return Checkpoint.objects.get(
        run_id=run_id, generation=hwm.generation, digest=hwm.checkpoint_digest
    )


def store_bytes(run_id: str, raw: bytes, *, digest_column: bool, hwm_digest: bool) -> None:
    """Overwrite the committed row's bytes like an attacker with database access would."""
    row = committed_row(run_id)
    new = {"envelope": raw}
    if digest_column:
        new["digest"] = digest_bytes(raw)
    Checkpoint.objects.filter(pk=row.pk).update(**new)
    if hwm_digest:
        HighWaterMark.objects.filter(run_id=run_id).update(checkpoint_digest=digest_bytes(raw))


def resign(body: dict) -> bytes:
    """Sign an edited envelope with the real checkpoint key (an insider with the key)."""
    unsigned = {k: v for k, v in body.items() if k != "mac"}
    body = {**unsigned, "mac": keyring_for(TrustRoot.CHECKPOINT).sign(canonical_json(unsigned)).mac}
    return canonical_json(body)


def two_generations(start_run):
    state, first = start_run()
    second = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)
    return state, first, second


@pytest.mark.parametrize("seed", range(6))
def test_random_corruption_of_the_committed_checkpoint_fails_closed(start_run, seed):
    state, _ = start_run()
    run_id = state.identity.run_id
    raw = bytearray(bytes(committed_row(run_id).envelope))
    rng = random.Random(seed)
    for _ in range(1 + seed):
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    store_bytes(run_id, bytes(raw), digest_column=False, hwm_digest=False)

    with pytest.raises((CheckpointCorruptError, BadSignatureError)):
        restore(run_id)


@pytest.mark.parametrize("hwm_too", [False, True], ids=["row-digest", "row-and-hwm-digest"])
def test_a_payload_edited_with_its_plain_sha256_recomputed_is_rejected(start_run, hwm_too):
    state, _ = start_run()
    run_id = state.identity.run_id
    body = json.loads(bytes(committed_row(run_id).envelope))
    body["payload"]["limits"]["cost_micros"] = 10**9  # a bigger budget, hashes recomputed
    store_bytes(run_id, canonical_json(body), digest_column=True, hwm_digest=hwm_too)

    with pytest.raises(BadSignatureError) as caught:
        restore(run_id)
    assert "checkpoint-test-1" in str(caught.value)


def test_a_checkpoint_checked_with_the_wrong_key_is_rejected(start_run, monkeypatch):
    state, _ = start_run()
    impostor = make_test_key(TrustRoot.CHECKPOINT, "checkpoint-test-1")  # same id, other bytes
    monkeypatch.setenv("RATCHET_CHECKPOINT_KEYS", impostor.spec)

    with pytest.raises(BadSignatureError):
        restore(state.identity.run_id)


def test_a_checkpoint_signed_under_an_unknown_key_id_is_rejected(start_run, monkeypatch):
    state, _ = start_run()
    monkeypatch.setenv(
        "RATCHET_CHECKPOINT_KEYS", make_test_key(TrustRoot.CHECKPOINT, "other-key").spec
    )

    with pytest.raises(UnknownKeyError) as caught:
        restore(state.identity.run_id)
    assert "checkpoint-test-1" in str(caught.value)


def test_a_rotated_key_still_verifies_what_the_old_key_signed(start_run, monkeypatch, keys):
    state, first = start_run()
    run_id = state.identity.run_id
    new = make_test_key(TrustRoot.CHECKPOINT, "checkpoint-test-2")
    monkeypatch.setenv("RATCHET_CHECKPOINT_KEYS", f"{new.spec},{keys['checkpoint'].spec}")

    assert restore(run_id).envelope.key_id == "checkpoint-test-1"
    checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)
    assert restore(run_id).envelope.key_id == "checkpoint-test-2"

    monkeypatch.setenv("RATCHET_CHECKPOINT_KEYS", new.spec)  # the old key is retired
    assert restore(run_id).generation == 2


def test_an_old_but_valid_checkpoint_offered_after_a_newer_one_is_rolled_back(start_run):
    state, first, second = two_generations(start_run)
    run_id = state.identity.run_id
    old = bytes(Checkpoint.objects.get(run_id=run_id, generation=1).envelope)

    with pytest.raises(RollbackError) as caught:
        checkpoint_restore_offered(run_id=run_id, raw=old, scenario_fingerprint=FP)
    assert caught.value.context == {"run_id": run_id, "generation": 1, "hwm_generation": 2}

    current = bytes(committed_row(run_id).envelope)
    assert (
        checkpoint_restore_offered(run_id=run_id, raw=current, scenario_fingerprint=FP).generation
        == 2
    )


def test_an_old_but_valid_checkpoint_swapped_into_the_store_is_rolled_back(start_run):
    state, _, _ = two_generations(start_run)
    run_id = state.identity.run_id
    old = bytes(Checkpoint.objects.get(run_id=run_id, generation=1).envelope)
    store_bytes(run_id, old, digest_column=False, hwm_digest=False)

    with pytest.raises(RollbackError):
        restore(run_id)


def test_an_old_checkpoint_whose_digest_the_hwm_was_made_to_name_is_rolled_back(start_run):
    state, _, _ = two_generations(start_run)
    run_id = state.identity.run_id
    old = Checkpoint.objects.get(run_id=run_id, generation=1)
    Checkpoint.objects.filter(run_id=run_id, generation=2).update(generation=3)  # hide g2
    Checkpoint.objects.filter(pk=old.pk).update(generation=2)  # and relabel g1's row
    HighWaterMark.objects.filter(run_id=run_id).update(checkpoint_digest=old.digest)

    with pytest.raises(RollbackError):
        restore(run_id)  # the envelope itself says generation 1


def test_a_deleted_committed_checkpoint_fails_closed(start_run):
    state, _, _ = two_generations(start_run)
    run_id = state.identity.run_id
    Checkpoint.objects.filter(run_id=run_id, generation=2).delete()

    with pytest.raises(CheckpointNotFoundError):
        restore(run_id)


def test_a_missing_hwm_row_fails_closed(start_run):
    state, _ = start_run()
    HighWaterMark.objects.filter(run_id=state.identity.run_id).delete()

    with pytest.raises(HighWaterMarkMissingError):
        restore(state.identity.run_id)


def _rename_hwm_table(old: str, new: str) -> None:
    with connections[hwm_alias()].cursor() as cursor:  # the mark's own database (section 4.2)
        cursor.execute(f"ALTER TABLE {old} RENAME TO {new}")


def test_a_missing_hwm_table_fails_closed_inside_a_transaction(start_run):
    state, _ = start_run()
    _rename_hwm_table(
        "runtime_highwatermark", "runtime_highwatermark_gone"
    )  # rolled back with the test

    with pytest.raises(HighWaterMarkMissingError, match="unavailable"):
        restore(state.identity.run_id)
    # The failure was contained in a savepoint: the caller's transaction still works.
    assert Checkpoint.objects.filter(run_id=state.identity.run_id).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_missing_hwm_table_fails_closed(start_run):
    state, _ = start_run()
    _rename_hwm_table("runtime_highwatermark", "runtime_highwatermark_gone")
    try:
        with pytest.raises(HighWaterMarkMissingError, match="unavailable"):
            restore(state.identity.run_id)
    finally:
        _rename_hwm_table("runtime_highwatermark_gone", "runtime_highwatermark")


@pytest.mark.django_db(transaction=True)
def test_a_missing_hwm_database_fails_closed(start_run, tmp_path):
    state, _ = start_run()
    if connection.vendor == "sqlite":
        missing = f"sqlite:///{tmp_path / 'no-such-dir' / 'hwm.sqlite3'}"
    else:
        missing = "postgres://postgres@127.0.0.1:5432/ratchet_hwm_that_does_not_exist"

    child = run_worker(
        "restore",
        "--run-id",
        state.identity.run_id,
        env=child_env(RATCHET_HWM_DATABASE_URL=missing),
    )

    assert child.returncode == 0, child.stderr
    # A store that does not answer is an outage (a HighWaterMarkMissingError that freezes nothing,
    # DESIGN.md section 8.8): the restore fails closed and succeeds once the store is back.
    assert child.last["error"] == "MarkStoreUnavailableError"
    assert run_worker("restore", "--run-id", state.identity.run_id).last["outcome"] == "restored"


@pytest.mark.parametrize("where", ["payload", "envelope"])
def test_an_unknown_field_is_rejected_even_under_a_valid_mac(start_run, where):
    state, _ = start_run()
    run_id = state.identity.run_id
    body = json.loads(bytes(committed_row(run_id).envelope))
    (body["payload"] if where == "payload" else body)["surprise"] = "ignored?"
    store_bytes(run_id, resign(body), digest_column=True, hwm_digest=True)

    with pytest.raises(CheckpointSchemaError, match="surprise"):
        restore(run_id)


@pytest.mark.parametrize(
    "change",
    [
        {"task_version": "2"},
        {"policy_version": "2"},
        {"versions": VersionSet(model="other-model", prompt="none", rules="r1", tool_schema="ts1")},
    ],
    ids=["task-version", "policy-version", "version-set"],
)
def test_a_changed_task_or_policy_version_is_refused(start_run, change):
    state, _ = start_run()

    with pytest.raises(VersionMismatchError):
        restore(state.identity.run_id, **change)
    assert (
        restore(
            state.identity.run_id, task_version="1", policy_version="1", versions=state.versions
        ).generation
        == 1
    )


def test_a_scenario_fingerprint_mismatch_is_refused(start_run):
    state, _ = start_run()

    with pytest.raises(ScenarioMismatchError):
        restore(
            state.identity.run_id,
            scenario=scenario_fingerprint(allowlist=["write_file", "delete_file"]),
        )


def test_a_checkpoint_of_another_run_is_refused(start_run):
    mine, _ = start_run()
    theirs, _ = start_run()
    foreign = bytes(committed_row(theirs.identity.run_id).envelope)

    with pytest.raises(IdentityMismatchError):
        checkpoint_restore_offered(
            run_id=mine.identity.run_id, raw=foreign, scenario_fingerprint=FP
        )
    store_bytes(mine.identity.run_id, foreign, digest_column=False, hwm_digest=True)
    with pytest.raises(IdentityMismatchError):
        restore(mine.identity.run_id)
