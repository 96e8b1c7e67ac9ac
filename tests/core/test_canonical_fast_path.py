"""The fast canonical encoder is byte-identical to the reference RFC 8785 encoder.

A commit encodes the state once (DESIGN.md section 4.3), and digests and MACs are over those
bytes, so the fast path must never produce other bytes than the reference would.

``runtime.core.canonical.canonical_json`` takes the standard library's C encoder for the values
Ratchet stores and the reference ``rfc8785`` package for the rest; these properties hold it to the
reference on generated values, including non-ASCII and astral-plane keys (which RFC 8785 orders by
UTF-16 code units) and every control character.
"""

from __future__ import annotations

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.core.canonical import canonical_json
from runtime.errors import CanonicalizationError

# Every code point but lone surrogates (which no valid JSON text can carry), weighted towards the
# places where encoders disagree: controls, the U+E000..U+FFFF block, and astral characters.
_TRICKY = st.sampled_from(["\x00", "\x1f", "\x7f", "\u2028", "\ue000", "\uffff", "\U0001f600", "\U00010000", '"', "\\"])
_CHARS = st.characters(exclude_categories=("Cs",))
_TEXT = st.lists(st.one_of(_CHARS, _TRICKY), max_size=12).map("".join)
_INTS = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)

_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(_TEXT, children, max_size=6),
    ),
    max_leaves=40,
)
_JSON_NO_FLOATS = st.recursive(
    st.one_of(st.none(), st.booleans(), _INTS, _TEXT),
    lambda children: st.one_of(st.lists(children, max_size=6), st.dictionaries(_TEXT, children, max_size=6)),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_it_matches_the_reference_on_any_json_value(value: object) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=400, deadline=None)
@given(_JSON_NO_FLOATS)
def test_it_matches_the_reference_on_what_checkpoints_hold(value: object) -> None:
    # No floats: the values the runtime stores (money is integer micro-units), i.e. the fast path.
    assert canonical_json(value) == rfc8785.dumps(value)


def test_it_orders_astral_keys_by_utf16_code_units() -> None:
    value = {"\ue000": 1, "\U0001f600": 2, "a": 3}
    assert canonical_json(value) == rfc8785.dumps(value)
    assert canonical_json(value).index("\U0001f600".encode()) < canonical_json(value).index("\ue000".encode())


@pytest.mark.parametrize(
    "bad",
    [2**53, -(2**53), {1: "non-str key"}, "\ud800", {"k": ["\udfff"]}, float("nan"), {"x": {1, 2}}, b"bytes"],
    ids=["int-too-big", "int-too-small", "int-key", "lone-surrogate", "nested-surrogate", "nan", "set", "bytes"],
)
def test_it_refuses_what_rfc8785_cannot_encode_with_a_typed_error(bad: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(bad)


def test_it_refuses_runaway_nesting_with_a_typed_error() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(CanonicalizationError):
        canonical_json(deep)
