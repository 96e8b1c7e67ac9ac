"""Old checkpoints migrate forward, or fail typed and stay put (DESIGN.md section 3).

Story: the runtime was upgraded while a run sat at a schema-v1 checkpoint. On resume the v1
checkpoint (a committed fixture, signed with a throwaway test key) is authenticated as written,
then migrated to v2. A v1 checkpoint that cannot be migrated exactly, or a schema this code
does not know, raises ``CheckpointMigrationError`` and is left untouched for a human; a forged
v1 checkpoint is refused before any migrator sees it.
"""

from __future__ import annotations

import json

import pytest

from runtime.core import migrators
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import SCHEMA_VERSION, ExecutedWrite, LedgerHead, Phase
from runtime.core.envelope import open_envelope
from runtime.core.ledger import LedgerKind
from runtime.core.migrators import MIGRATORS, migrate_envelope, v1_to_v2
from runtime.errors import BadSignatureError, CheckpointMigrationError
from tests.core.v1_checkpoints import (
    V1_FIXTURE,
    V1_KEY_FILE,
    build_v1_envelope,
    fixture_keyring,
    sign_body,
    v1_body,
)


@pytest.fixture
def v1_bytes() -> bytes:
    return V1_FIXTURE.read_bytes()


@pytest.fixture
def migrations_seen(monkeypatch) -> list[int]:
    """Records every v1 -> v2 migration that actually runs."""
    seen: list[int] = []

    def spy(body):
        seen.append(body["schema_version"])
        return v1_to_v2(body)

    monkeypatch.setitem(MIGRATORS, 1, spy)
    return seen


def test_it_opens_the_committed_v1_fixture_as_a_current_checkpoint(v1_bytes, migrations_seen):
    envelope = open_envelope(v1_bytes, keyring=fixture_keyring())

    assert migrations_seen == [1]
    assert envelope.schema_version == SCHEMA_VERSION == 3
    assert (envelope.run_id, envelope.generation) == ("run-v1-fixture", 3)
    assert envelope.key_id == "TEST-ONLY-v1-fixture-key"
    state = envelope.payload
    assert state.limits.cost_micros == 250_000  # 0.25 USD
    assert state.usage.cost_micros == 100_000  # 0.1 USD, exactly, not 100000.00000000001
    assert state.replan_epoch == 0
    # v2 -> v3: the growing lists left the payload; they are staged for the ledger (section 3.1)
    assert state.ledger == LedgerHead()
    carried = envelope.carried_ledger
    assert [(kind, key) for kind, key, _ in carried] == [
        (LedgerKind.EXECUTED_WRITE, "ik-run-v1-fixture-0")]
    executed = ExecutedWrite.model_validate_json(carried[0][2])
    assert state.phase is Phase.PENDING
    assert state.pending is not None and state.pending.replan_epoch == 0
    assert state.pending.idempotency_key == "ik-run-v1-fixture-1"
    assert executed.receipt.fingerprint() == executed.receipt_fingerprint
    assert state.scope.permissions == ["workspace:write"]


def test_it_leaves_the_stored_fixture_bytes_and_mac_as_they_were(v1_bytes):
    open_envelope(v1_bytes, keyring=fixture_keyring())
    assert V1_FIXTURE.read_bytes() == v1_bytes
    assert json.loads(v1_bytes)["schema_version"] == 1


def test_the_committed_fixture_is_exactly_what_the_generator_builds(v1_bytes):
    assert json.loads(v1_bytes) == json.loads(build_v1_envelope())
    key = json.loads(V1_KEY_FILE.read_text())
    assert key["key_id"].startswith("TEST-ONLY") and "TEST KEY" in key["_comment"]


def test_it_refuses_a_forged_v1_checkpoint_before_migrating_it(v1_bytes, migrations_seen):
    body = json.loads(v1_bytes)
    body["payload"]["usage"]["cost_usd"] = 0.0  # edited, MAC not redone
    with pytest.raises(BadSignatureError):
        open_envelope(canonical_json(body), keyring=fixture_keyring())
    assert migrations_seen == []


def test_it_refuses_a_v1_checkpoint_signed_by_a_stranger_before_migrating_it(migrations_seen):
    from tests.factories import make_keyring

    stranger = make_keyring(key_ids=("TEST-ONLY-v1-fixture-key",))
    raw = build_v1_envelope(keyring=stranger)
    with pytest.raises(BadSignatureError):
        open_envelope(raw, keyring=fixture_keyring())
    assert migrations_seen == []


@pytest.mark.parametrize("cost_usd", [1e-9, 0.0000005, -0.25, True, "0.25", None])
def test_it_refuses_a_v1_cost_it_cannot_migrate_exactly(cost_usd, migrations_seen):
    raw = build_v1_envelope(usage_cost_usd=cost_usd)
    with pytest.raises(CheckpointMigrationError) as caught:
        open_envelope(raw, keyring=fixture_keyring())
    assert migrations_seen == [1]
    assert caught.value.context["run_id"] == "run-v1-fixture"
    assert caught.value.context["generation"] == 3
    assert caught.value.context["schema_version"] == 1
    assert "manual handling" in str(caught.value)


def test_it_refuses_a_schema_version_newer_than_this_runtime():
    body = v1_body()
    body["schema_version"] = 99
    with pytest.raises(CheckpointMigrationError) as caught:
        open_envelope(sign_body(body, fixture_keyring()), keyring=fixture_keyring())
    assert "v99 is newer" in str(caught.value)


@pytest.mark.parametrize("version", [0, -1, "1", 1.5, None])
def test_it_refuses_a_schema_version_it_has_no_path_from(version):
    body = v1_body()
    body["schema_version"] = version
    with pytest.raises(CheckpointMigrationError):
        open_envelope(sign_body(body, fixture_keyring()), keyring=fixture_keyring())


def test_it_refuses_a_v1_checkpoint_that_already_has_v2_fields():
    body = v1_body()
    body["payload"]["replan_epoch"] = 4
    with pytest.raises(CheckpointMigrationError) as caught:
        open_envelope(sign_body(body, fixture_keyring()), keyring=fixture_keyring())
    assert "payload.replan_epoch" in str(caught.value)


def test_it_turns_a_migrated_checkpoint_that_is_invalid_at_v2_into_a_migration_error():
    body = v1_body()
    body["payload"]["phase"] = "running"  # a running run with a pending write: invalid at v2
    with pytest.raises(CheckpointMigrationError) as caught:
        open_envelope(sign_body(body, fixture_keyring()), keyring=fixture_keyring())
    assert "pending" in str(caught.value)


def test_it_turns_a_crashing_migrator_into_a_typed_error(monkeypatch):
    def broken(body):
        return body["payload"]["no-such-section"]

    monkeypatch.setitem(MIGRATORS, 1, broken)
    with pytest.raises(CheckpointMigrationError) as caught:
        open_envelope(build_v1_envelope(), keyring=fixture_keyring())
    assert "KeyError" in str(caught.value)


def test_it_refuses_a_migrator_that_skips_or_repeats_a_version(monkeypatch):
    monkeypatch.setitem(MIGRATORS, 1, lambda body: {**body, "schema_version": 1})
    with pytest.raises(CheckpointMigrationError):
        migrate_envelope(v1_body())


def test_it_does_not_modify_the_body_it_migrates():
    body = v1_body()
    before = json.dumps(body, sort_keys=True)
    migrated = migrate_envelope(body)
    assert json.dumps(body, sort_keys=True) == before
    assert migrated["schema_version"] == 3 and "cost_usd" not in migrated["payload"]["usage"]
    assert "executed" not in migrated["payload"] and migrated["carried_ledger"]["executed"]


def test_it_refuses_to_register_two_migrators_from_one_version(monkeypatch):
    monkeypatch.setattr(migrators, "MIGRATORS", dict(MIGRATORS))
    with pytest.raises(CheckpointMigrationError):
        migrators.migrator(1)(v1_to_v2)
