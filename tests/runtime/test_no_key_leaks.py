"""Keys never appear in checkpoints, trace, logs, CLI output or errors (DESIGN.md section 4).

The story drives every path that writes or reports something (commits, refusals, tampering,
restore failures, the CLI, a child worker) with known keys configured, then searches everything
it produced for the keys in raw, base64 and hex form.
"""

from __future__ import annotations

import json
import logging
import pickle
import time
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from runtime.checkpoints.checks import checkpoint_restore_offered
from runtime.checkpoints.protocol import checkpoint_commit, checkpoint_restore
from runtime.checkpoints.reports import checkpoint_inspect
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Phase
from runtime.core.signing import TrustRoot
from runtime.errors import RatchetError
from runtime.keys import keyring_for
from runtime.models import Checkpoint, HighWaterMark, Run, TraceEvent
from runtime.ownership.leases import lease_acquire
from tests.factories import scenario_fingerprint
from tests.helpers.keys import make_test_key
from tests.helpers.procs import run_manage, run_worker
from tests.runtime.conftest import advance

FP = scenario_fingerprint()


def _text_of(exc: BaseException) -> bytes:
    parts = [str(exc), repr(exc), str(getattr(exc, "context", ""))]
    if isinstance(exc, RatchetError):
        parts.append(pickle.dumps(exc).decode("latin-1"))
    return "\n".join(parts).encode("utf-8", "surrogateescape")


@pytest.mark.django_db(transaction=True)
def test_keys_never_appear_in_checkpoints_logs_cli_output_or_errors(
    start_run, keys, monkeypatch, caplog
):
    caplog.set_level(logging.DEBUG)
    produced: list[bytes] = []
    errors: list[BaseException] = []

    def expect_error(fn, *args, **kwargs):
        with pytest.raises(Exception) as caught:
            fn(*args, **kwargs)
        errors.append(caught.value)

    # Normal work: create, commit, restore.
    state, first = start_run(worker="worker-a", ttl_seconds=0.5)
    run_id = state.identity.run_id
    second = checkpoint_commit(
        lease=first.lease,
        state=advance(state),
        expected_generation=1,
        events=[("step", {"note": "normal work"})],
    )
    checkpoint_restore(run_id=run_id, scenario_fingerprint=FP)

    # Refusals: invalid state, stale generation, lost lease, rollback, scenario mismatch.
    expect_error(
        checkpoint_commit,
        lease=second.lease,
        state=advance(state, phase=Phase.PENDING),
        expected_generation=2,
    )
    expect_error(checkpoint_commit, lease=second.lease, state=advance(state), expected_generation=1)
    time.sleep(0.6)
    lease_acquire(run_id=run_id, worker="worker-b", ttl_seconds=30)
    expect_error(checkpoint_commit, lease=second.lease, state=advance(state), expected_generation=2)
    old = bytes(Checkpoint.objects.get(run_id=run_id, generation=1).envelope)
    expect_error(checkpoint_restore_offered, run_id=run_id, raw=old, scenario_fingerprint=FP)
    expect_error(
        checkpoint_restore, run_id=run_id, scenario_fingerprint=scenario_fingerprint(task="x")
    )

    # A child worker logs its own work and its own refusal.
    child = run_worker("commit", "--run-id", run_id, "--worker", "worker-c")
    produced += [child.stdout.encode(), child.stderr.encode()]

    # Wrong key, unknown key id, tampered payload: restore and the CLI report them.
    impostor = make_test_key(TrustRoot.CHECKPOINT, keys["checkpoint"].key_id)
    stranger = make_test_key(TrustRoot.CHECKPOINT, "stranger-key")
    for spec in (impostor.spec, stranger.spec):
        monkeypatch.setenv("RATCHET_CHECKPOINT_KEYS", spec)
        expect_error(checkpoint_restore, run_id=run_id, scenario_fingerprint=FP)
        produced += [r.status.encode() for r in checkpoint_inspect(run_id=run_id)]
    monkeypatch.setenv("RATCHET_CHECKPOINT_KEYS", keys["checkpoint"].spec)
    hwm = HighWaterMark.objects.get(run_id=run_id)
    row = Checkpoint.objects.get(run_id=run_id, digest=hwm.checkpoint_digest)
    body = json.loads(bytes(row.envelope))
    body["payload"]["cursor"] = 99
    Checkpoint.objects.filter(pk=row.pk).update(envelope=canonical_json(body))
    expect_error(checkpoint_restore, run_id=run_id, scenario_fingerprint=FP)

    out, err = StringIO(), StringIO()
    call_command(
        "checkpoint", "show", run_id, "--generation", str(hwm.generation), stdout=out, stderr=err
    )
    for action in ("verify", "show"):
        expect_error(call_command, "checkpoint", action, run_id, stdout=out, stderr=err)
    cli = run_manage("checkpoint", "verify", run_id)
    assert cli.returncode != 0
    produced += [
        out.getvalue().encode(),
        err.getvalue().encode(),
        cli.stdout.encode(),
        cli.stderr.encode(),
    ]

    # Keyrings and keys describe themselves without their bytes.
    for root in TrustRoot:
        ring = keyring_for(root)
        produced += [repr(ring).encode(), str(ring).encode()]

    # Everything stored.
    produced += [bytes(e) for e in Checkpoint.objects.values_list("envelope", flat=True)]
    produced += [repr(list(TraceEvent.objects.values())).encode()]
    produced += [
        repr(list(Run.objects.values())).encode(),
        repr(list(HighWaterMark.objects.values())).encode(),
    ]
    if connection.vendor == "sqlite":
        db = settings.DATABASES["default"]["NAME"]
        produced += [Path(p).read_bytes() for p in (db, f"{db}-wal") if Path(p).exists()]
    produced += [_text_of(e) for e in errors]
    produced += [r.getMessage().encode() for r in caplog.records]
    produced += [caplog.text.encode()]

    assert len(errors) == 10
    assert {type(e).__name__ for e in errors} >= {
        "CheckpointInvariantError",
        "StaleGenerationError",
        "LeaseLostError",
        "RollbackError",
        "ScenarioMismatchError",
        "BadSignatureError",
        "UnknownKeyError",
        "CommandError",
    }
    assert caplog.records, "the services logged nothing, so the log scan proves nothing"
    secrets = [*keys.values(), impostor, stranger]
    leaks = [
        (key.root, key.key_id, i)
        for key in secrets
        for form in key.leak_forms()
        for i, blob in enumerate(produced)
        if form in blob
    ]
    assert leaks == []
