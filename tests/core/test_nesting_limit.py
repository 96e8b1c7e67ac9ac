"""Deeply nested input fails typed, never with a raw RecursionError (DESIGN.md section 2.2).

Story: a reviewer fed the checkpoint decoder JSON nested 500-1000 levels deep and got
tracebacks. Every decoder of outside input refuses nesting deeper than ``MAX_NESTING_DEPTH``
with its own typed error, the writer refuses to seal such a state (so nothing signed is
unreadable), and the limit is the same number everywhere.
"""

from __future__ import annotations

import json

import pytest

from runtime.core.checkpoint import Action, Phase
from runtime.core.envelope import open_envelope, seal
from runtime.core.migrators import migrate_envelope
from runtime.core.nesting import (
    MAX_NESTING_DEPTH,
    json_loads_bounded,
    json_text_depth,
    nesting_check,
    value_depth,
)
from runtime.errors import (
    CheckpointCorruptError,
    CheckpointMigrationError,
    CheckpointSchemaError,
    NestingTooDeepError,
)
from tests.core import builders as b
from tests.core.v1_checkpoints import sign_body, v1_body
from tests.factories import make_keyring, make_state

DEPTHS = [MAX_NESTING_DEPTH + 1, 500, 1000, 100_000]


def _deep_list(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.fixture
def keyring():
    return make_keyring(key_ids=("ckpt-deep",))


def test_it_measures_depth_without_counting_brackets_inside_strings():
    assert json_text_depth(b"3") == 0
    assert json_text_depth('{"a": [1, {"b": []}]}') == 4
    assert json_text_depth(b'["[[[[[[", "\\"{{{{"]') == 1
    assert json_text_depth(memoryview(b"[[]]")) == 2
    assert value_depth({"a": [1, {"b": ()}]}) == 4
    assert value_depth(_deep_list(100_000)) == MAX_NESTING_DEPTH + 1  # stops early, no recursion


def test_it_accepts_exactly_the_limit_and_refuses_one_more():
    at_limit = "[" * MAX_NESTING_DEPTH + "]" * MAX_NESTING_DEPTH
    assert value_depth(json_loads_bounded(at_limit)) == MAX_NESTING_DEPTH
    with pytest.raises(NestingTooDeepError) as caught:
        json_loads_bounded("[" + at_limit + "]", what="bundle")
    assert caught.value.message == f"bundle nests more than {MAX_NESTING_DEPTH} levels deep"
    assert isinstance(caught.value, ValueError)  # decoders that map ValueError keep working
    nesting_check(MAX_NESTING_DEPTH, what="x")


@pytest.mark.parametrize("depth", DEPTHS)
def test_it_refuses_deep_checkpoint_bytes_as_corrupt(keyring, depth):
    for raw in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        with pytest.raises(CheckpointCorruptError, match="nests more than 64 levels deep"):
            open_envelope(raw.encode(), keyring=keyring)


def test_it_refuses_a_deep_checkpoint_even_when_it_is_signed(keyring):
    """A key holder's (or a bug's) deep checkpoint is refused before the MAC or any parser."""
    raw, _ = seal(make_state(run_id="run-deep"), generation=1, keyring=keyring)
    body = json.loads(raw)
    body["payload"]["deep"] = _deep_list(MAX_NESTING_DEPTH)
    signed = keyring.sign(b"anything").mac  # the MAC is never reached
    body["mac"] = signed
    with pytest.raises(CheckpointCorruptError, match="nests more than"):
        open_envelope(json.dumps(body).encode(), keyring=keyring)


def test_it_never_seals_a_state_it_could_not_open_again(keyring):
    state = make_state(run_id="run-deep")
    state.pending = b.pending_for(state, act=Action(kind="http_request", target="/orders",
                                                      params={"body": _deep_list(MAX_NESTING_DEPTH)}))
    state.phase = Phase.PENDING

    with pytest.raises(CheckpointSchemaError, match="nests more than 63 levels deep"):
        seal(state, generation=1, keyring=keyring)

    state.pending = b.pending_for(state, act=Action(kind="http_request", target="/orders",
                                                      params={"body": _deep_list(20)}))
    raw, _ = seal(state, generation=1, keyring=keyring)
    assert open_envelope(raw, keyring=keyring).payload.pending is not None


@pytest.mark.parametrize("depth", DEPTHS)
def test_it_refuses_a_deep_body_in_the_migrators(depth):
    body = v1_body()
    body["payload"]["deep"] = _deep_list(depth)

    with pytest.raises(CheckpointMigrationError, match="nests more than 64 levels deep"):
        migrate_envelope(body)


def test_it_refuses_a_deep_signed_old_schema_checkpoint(keyring):
    body = v1_body()
    body["payload"]["deep"] = _deep_list(40)
    raw = sign_body(body, keyring)
    deeper = raw.replace(b'"deep":', b'"deep":' + b"[" * 30, 1).replace(b'"mac"', b"]" * 30 + b',"mac"', 1)

    with pytest.raises(CheckpointCorruptError):
        open_envelope(deeper, keyring=keyring)


def test_it_refuses_a_non_object_in_the_migrators():
    with pytest.raises(CheckpointMigrationError, match="not a JSON object"):
        migrate_envelope([1, 2])  # type: ignore[arg-type]
