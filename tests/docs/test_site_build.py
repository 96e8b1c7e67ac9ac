"""Story: someone renames a command, adds a setting or breaks a link, and the docs tell on them.

The site is built once, the way CI and a writer build it (``mkdocs build --strict``: a broken
link, a missing anchor, a page left out of the navigation or a docstring mkdocstrings cannot
read fails the build), and the generated reference pages are checked against the code they
come from: every management command, every environment variable of the settings table, every
path of the OpenAPI document and every metric family appears.

The build reads no database, so it runs in the SQLite pass of ``tests/run`` only and is skipped
in the PostgreSQL pass (the same files would be built twice).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.project.environment import READ_ELSEWHERE, VARIABLES
from tests.test_design_references import document_headings

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "runtime" / "mkdocs.yml"
ON_POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))

pytestmark = pytest.mark.skipif(ON_POSTGRES, reason="the docs build reads no database: built in the SQLite pass")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(RATCHET_VAR_DIR=str(tmp_path_factory.mktemp("docs-var")), DISABLE_MKDOCS_2_WARNING="true")
    started = time.monotonic()
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG),
                            "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    print(f"docs site built in {time.monotonic() - started:.1f} s")
    return out


def text(site: Path, page: str) -> str:
    return (site / page / "index.html").read_text(encoding="utf-8")


def test_every_command_is_in_the_command_reference(site: Path) -> None:
    commands = sorted(p.stem for p in (ROOT / "runtime/management/commands").glob("*.py") if p.stem != "__init__")
    commands += sorted(p.stem for p in (ROOT / "review/management/commands").glob("*.py") if p.stem != "__init__")
    page = text(site, "reference/commands")
    missing = [c for c in commands if f'id="{c}"' not in page]
    assert not missing, missing
    assert 'id="combinations-promote"' in page  # subcommands get sections of their own


def test_every_setting_is_in_the_settings_reference(site: Path) -> None:
    page = text(site, "reference/settings")
    missing = [v.name for v in (*VARIABLES, *READ_ELSEWHERE) if v.name not in page]
    assert not missing, missing


def test_every_api_path_is_in_the_http_reference(site: Path) -> None:
    schema = json.loads((site / "reference" / "openapi.json").read_text())
    page = text(site, "reference/http-api")
    assert schema["paths"]
    missing = [p for p in schema["paths"] if p.replace("{", "").replace("}", "") not in
               page.replace("{", "").replace("}", "")]
    assert not missing, missing


def test_every_metric_family_is_in_the_metrics_reference(site: Path) -> None:
    from runtime.observability.export import CounterCollector

    page = text(site, "reference/metrics")
    names = [f.name for f in CounterCollector().describe()]
    assert "ratchet_recovery_duration_seconds" in names
    assert not [n for n in names if n not in page]


def test_the_plugin_protocols_come_from_their_docstrings(site: Path) -> None:
    page = text(site, "reference/plugin-protocols")
    for symbol in ("runtime.planners.base.Planner", "runtime.adapters.base.Adapter", "runtime.verifiers.base.Verifier"):
        assert f'id="{symbol}"' in page, symbol
    assert "lookup_receipt" in page and "predict_post_state" in page


def test_every_design_section_has_a_concept_link(site: Path) -> None:
    sections = [h.number for h in document_headings() if "." in h.number]
    assert len(sections) > 30
    page = text(site, "concepts")
    missing = [s for s in sections if f">{s} " not in page]
    assert not missing, missing
