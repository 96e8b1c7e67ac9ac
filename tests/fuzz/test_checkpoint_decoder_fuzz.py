"""The checkpoint decoder fed arbitrary bytes raises only Ratchet's typed errors (DESIGN.md section 7).

Story: a reviewer fuzzed every decoder and wanted no untyped exception from
any of them. ``open_envelope`` is fed random bytes, random JSON, deeply nested JSON, and valid
checkpoints with one value replaced by an arbitrary one -- re-signed with the right key, so the
change gets past the MAC and reaches schema, invariants and migrators. Every failure must be a
``RatchetError`` (the runtime freezes the run on those); anything else would be a traceback.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Phase
from runtime.core.envelope import open_envelope, seal
from runtime.core.migrators import migrate_envelope
from runtime.errors import CanonicalizationError, RatchetError
from tests.core import builders as b
from tests.core.v1_checkpoints import sign_body, v1_body
from tests.factories import make_keyring, make_state
from tests.fuzz.profiles import JSON_VALUES, QUICK, THOROUGH, deep, json_paths, json_replace

KEYRING = make_keyring(key_ids=("ckpt-fuzz",))


def _sealed_body() -> dict[str, Any]:
    state = make_state(run_id="run-fuzz")
    state.pending = b.pending_for(state)
    state.phase = Phase.PENDING
    raw, _ = seal(state, generation=3, keyring=KEYRING)
    return json.loads(raw)


SEALED = _sealed_body()


def _open_typed(raw: bytes) -> None:
    try:
        open_envelope(raw, keyring=KEYRING)
    except RatchetError:
        pass


def check_bytes(raw: bytes) -> None:
    _open_typed(raw)


def check_resigned_mutation(data: st.DataObject, body: dict[str, Any]) -> None:
    path = data.draw(st.sampled_from(json_paths(body)), label="path")
    value = data.draw(JSON_VALUES, label="value")
    mutated = json_replace(body, path, value)
    if isinstance(mutated, dict):
        mutated = {k: v for k, v in mutated.items() if k != "mac"}
    try:
        raw = sign_body(mutated, KEYRING) if isinstance(mutated, dict) else canonical_json(mutated)
    except CanonicalizationError:
        assume(False)
    _open_typed(raw)
    if isinstance(mutated, dict):
        try:
            migrate_envelope(mutated)
        except RatchetError:
            pass


@QUICK
@given(st.binary(max_size=400))
def test_it_raises_only_typed_errors_for_arbitrary_bytes(raw: bytes) -> None:
    check_bytes(raw)


@QUICK
@given(JSON_VALUES)
def test_it_raises_only_typed_errors_for_arbitrary_json(value: Any) -> None:
    check_bytes(json.dumps(value).encode())


@pytest.mark.parametrize("depth", [65, 500, 1000, 50_000])
@pytest.mark.parametrize("kind", ["list", "object"])
def test_it_raises_only_typed_errors_for_deep_json(depth: int, kind: str) -> None:
    with pytest.raises(RatchetError):
        open_envelope(deep(depth, kind=kind).encode(), keyring=KEYRING)


@QUICK
@given(st.data())
def test_it_raises_only_typed_errors_for_a_signed_checkpoint_with_one_value_changed(data) -> None:
    check_resigned_mutation(data, SEALED)


@QUICK
@given(st.data())
def test_it_raises_only_typed_errors_for_a_signed_v1_checkpoint_with_one_value_changed(data) -> None:
    check_resigned_mutation(data, v1_body())


@pytest.mark.slow
@THOROUGH
@given(st.binary(max_size=4000))
def test_it_raises_only_typed_errors_for_arbitrary_bytes_thoroughly(raw: bytes) -> None:
    check_bytes(raw)


@pytest.mark.slow
@THOROUGH
@given(st.data(), st.sampled_from(["v3", "v1"]))
def test_it_raises_only_typed_errors_for_changed_signed_checkpoints_thoroughly(data, version) -> None:
    check_resigned_mutation(data, SEALED if version == "v3" else v1_body())
