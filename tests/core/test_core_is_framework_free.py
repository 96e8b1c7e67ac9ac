"""The framework-free core imports nothing from Django (DESIGN.md section 2).

Checked in a fresh interpreter, because in the test process Django is already loaded. Every
module under ``runtime.core`` (and ``runtime.adapters`` / ``runtime.planners``, which the house
rules also keep framework-free, when they exist) is imported, then ``sys.modules`` is inspected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import importlib, json, pkgutil, sys

imported = []
for package_name in ("runtime.core", "runtime.adapters", "runtime.planners"):
    try:
        package = importlib.import_module(package_name)
    except ModuleNotFoundError:
        if package_name == "runtime.core":
            raise
        continue
    imported.append(package_name)
    for info in pkgutil.walk_packages(package.__path__, package_name + "."):
        importlib.import_module(info.name)
        imported.append(info.name)
importlib.import_module("runtime.errors")
print(json.dumps({
    "imported": imported,
    "framework": sorted(m for m in sys.modules if m.split(".")[0] in ("django", "celery")),
}))
"""


def _probe() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_it_imports_every_core_module_without_loading_django_or_celery():
    result = _probe()
    for name in ("runtime.core.canonical", "runtime.core.signing", "runtime.core.checkpoint",
                 "runtime.core.migrators", "runtime.core.statemachine"):
        assert name in result["imported"]
    assert result["framework"] == [], f"framework modules loaded by the core: {result['framework']}"
