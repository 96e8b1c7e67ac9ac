"""Story: a path whose component is longer than the file system's name limit (255 bytes).

Such a name can never be created on disk. A planner, a gateway caller or a task spec that names
one is refused with a typed error before anything is journalled or written, and the workspace
stays usable for every later call, resume and new run (N1: before, the write died with an
untyped ``OSError`` and the workspace's journal was left unusable).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.adapters.paths import MAX_NAME_BYTES, relative_path_refusal
from runtime.errors import PathEscapeError
from tests.adapters.support import Env

LONG = "a" * (MAX_NAME_BYTES + 1)
LONG_MULTIBYTE = "é" * 128  # 128 characters, 256 bytes


@pytest.mark.parametrize("path", [LONG, f"docs/{LONG}.md", LONG_MULTIBYTE, f"{LONG_MULTIBYTE}/notes.txt"])
def test_n1_it_refuses_a_path_segment_longer_than_name_max(env: Env, path: str) -> None:
    before = env.adapter.observe()

    with pytest.raises(PathEscapeError, match="255 bytes"):
        env.execute(env.write(path, b"x\n"), "key-1")

    after = env.adapter.observe()
    assert (after.version, after.state_fingerprint) == (before.version, before.state_fingerprint)
    assert env.adapter.receipts() == []


def test_n1_it_keeps_the_workspace_usable_after_refusing_a_long_name(workspace_env: Env) -> None:
    with pytest.raises(PathEscapeError):
        workspace_env.execute(workspace_env.write(f"notes/{LONG}", b"x\n"), "key-1")

    receipt = workspace_env.execute(workspace_env.write("notes/ok.txt", b"fine\n"), "key-2")

    assert receipt.idempotency_key == "key-2"
    assert [r.idempotency_key for r in workspace_env.adapter.receipts()] == ["key-2"]


def test_it_accepts_a_name_of_exactly_255_bytes(workspace_env: Env) -> None:
    name = "b" * MAX_NAME_BYTES
    receipt = workspace_env.execute(workspace_env.write(name, b"x\n"), "key-1")
    assert receipt.idempotency_key == "key-1"


def test_it_refuses_a_lone_surrogate_instead_of_failing_to_encode_it() -> None:
    refusal = relative_path_refusal("bad\udc80.txt")
    assert refusal is not None and "surrogate" in refusal[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=140),
                min_size=1, max_size=4))
def test_it_decides_every_component_by_its_utf8_length(parts: list[str]) -> None:
    path = "/".join(parts)
    refusal = relative_path_refusal(path)
    too_long = any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts)
    if too_long:
        assert refusal is not None
    if refusal is not None and "255 bytes" in refusal[0]:
        assert too_long
