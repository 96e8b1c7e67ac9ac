"""The bundle verifier never accepts a changed bundle and never fails untyped (DESIGN.md section 7).

Story: an auditor runs ``manage.py verify_bundle FILE`` on a file of unknown
origin. Whatever the file holds -- random bytes, JSON nested thousands deep, a real exported
bundle with one value replaced by any JSON value -- the command either says "bundle verifies"
(only for the untouched file) or fails with its error listing what failed (``CommandError``
built from the typed ``BundleFormatError`` or the findings); never a traceback. The loader
itself (``bundle_load``) raises only ``BundleFormatError``.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from hypothesis import assume, given
from hypothesis import strategies as st

from runtime.bundles.verification import bundle_load
from runtime.core.signing import TrustRoot
from runtime.errors import BundleFormatError
from runtime.keys import keyring_for
from tests.fuzz.profiles import JSON_VALUES, QUICK, THOROUGH, deep, json_paths, json_replace
from tests.review.rows import build_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(ratchet_keys, tmp_path: Path) -> dict[str, Any]:
    build_run(keyring_for(TrustRoot.CHECKPOINT), run_id="run-fuzz", generations=2, events=4)
    out = tmp_path / "bundle.json"
    call_command("export_bundle", "run-fuzz", "--out", str(out), "--by", "ops", stderr=StringIO())
    return json.loads(out.read_text())


def _verify(tmp_path: Path, data: bytes) -> str:
    """Run ``verify_bundle`` on ``data``: ``"ok"`` or ``"refused"``; anything else propagates."""
    path = tmp_path / "fuzzed.json"
    path.write_bytes(data)
    try:
        call_command("verify_bundle", str(path), stdout=StringIO())
    except CommandError:
        return "refused"
    return "ok"


def check_one_value_replaced(tmp_path: Path, bundle: dict[str, Any], data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(json_paths(bundle)), label="path")
    value = data.draw(JSON_VALUES, label="value")
    old = json_replace(bundle, (), bundle)
    for part in path:
        old = old[part]
    assume(json.dumps(value, sort_keys=True) != json.dumps(old, sort_keys=True))
    mutated = json_replace(bundle, path, value)
    assert _verify(tmp_path, json.dumps(mutated).encode()) == "refused", f"changed {path}"


def test_the_untouched_bundle_verifies(exported, tmp_path: Path) -> None:
    assert _verify(tmp_path, json.dumps(exported).encode()) == "ok"


@QUICK
@given(st.binary(max_size=300))
def test_the_loader_raises_only_its_typed_error(raw: bytes) -> None:
    try:
        bundle_load(raw)
    except BundleFormatError:
        pass


@pytest.mark.parametrize("depth", [129, 600, 1000, 50_000])
@pytest.mark.parametrize("kind", ["list", "object"])
def test_it_refuses_deep_json_typed(depth: int, kind: str, tmp_path: Path, ratchet_keys) -> None:
    with pytest.raises(BundleFormatError):
        bundle_load(deep(depth, kind=kind))
    assert _verify(tmp_path, deep(depth, kind=kind).encode()) == "refused"


@QUICK
@given(st.data())
def test_it_refuses_a_bundle_with_one_value_replaced(exported, tmp_path: Path, data) -> None:
    check_one_value_replaced(tmp_path, exported, data)


@pytest.mark.slow
@THOROUGH
@given(st.data())
def test_it_refuses_changed_bundles_thoroughly(exported, tmp_path: Path, data) -> None:
    check_one_value_replaced(tmp_path, exported, data)
