"""Several worker processes write to one environment at the same moment. The adapter's lock
serialises them: every write lands once, versions never collide, and the same key raced by
several processes still has exactly one effect. Real processes, not threads."""

from __future__ import annotations

import json
from pathlib import Path

from runtime.core.checkpoint import Receipt
from tests.adapters.support import Env, effects_for_key, start_child

WORKERS = 4


def _finish(procs) -> list[Receipt]:
    receipts = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        receipts.append(Receipt.model_validate_json(out))
    return receipts


def test_concurrent_writers_each_land_exactly_once(env: Env, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [start_child(env, env.write(f"notes/{i}.txt", f"note {i}\n".encode()), f"key-{i}",
                         start_file=go) for i in range(WORKERS)]
    go.touch()

    receipts = _finish(procs)

    assert len({r.environment_version_after for r in receipts}) == WORKERS
    assert sorted(r.idempotency_key for r in env.adapter.receipts()) == \
        [f"key-{i}" for i in range(WORKERS)]
    for i in range(WORKERS):
        assert effects_for_key(env, f"key-{i}") == 1
        assert (env.path / "notes" / f"{i}.txt").read_text() == f"note {i}\n"
    final = env.adapter.observe()
    assert final.version == env.adapter.receipts()[-1].environment_version_after


def test_a_key_raced_by_several_processes_has_one_effect(env: Env, tmp_path: Path) -> None:
    go = tmp_path / "go"
    action = env.write("notes/todo.txt", b"ship it\n")
    procs = [start_child(env, action, "key-1", start_file=go) for _ in range(WORKERS)]
    go.touch()

    receipts = _finish(procs)

    assert len({json.dumps(r.model_dump(mode="json"), sort_keys=True) for r in receipts}) == 1
    assert effects_for_key(env, "key-1") == 1
