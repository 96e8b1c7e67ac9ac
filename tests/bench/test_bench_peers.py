"""The scale bench's peer lives in a virtual environment of its own, made once and reused."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from runtime.bench import peers
from runtime.bench.peers import peer_python, peer_workload
from runtime.errors import BenchmarkError


def made_before(var_dir: Path) -> Path:
    venv = var_dir / "bench" / "peers" / "dbos-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    requirements = peers.PEERS / "dbos" / "requirements.txt"
    (venv / "requirements.sha256").write_text(hashlib.sha256(requirements.read_bytes()).hexdigest())
    return venv / "bin" / "python"


def test_it_reuses_an_environment_made_from_the_same_requirements(tmp_path, monkeypatch) -> None:
    python = made_before(tmp_path)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("made it again"))
    assert peer_python(name="dbos", var_dir=tmp_path) == python


def test_it_remakes_an_environment_whose_requirements_changed(tmp_path, monkeypatch) -> None:
    python = made_before(tmp_path)
    (python.parent.parent / "requirements.sha256").write_text("another digest")
    ran: list[list[str]] = []

    def run(argv, **_kwargs):
        ran.append(argv)
        if argv[1:3] == ["-m", "venv"]:
            Path(argv[3], "bin").mkdir(parents=True)
        return subprocess.CompletedProcess(argv, 0, "", "")
    monkeypatch.setattr(subprocess, "run", run)
    peer_python(name="dbos", var_dir=tmp_path)
    assert [argv[1:3] for argv in ran] == [["-m", "venv"], ["-m", "pip"]]
    assert ran[1][-1].endswith("dbos/requirements.txt")


def test_it_says_why_it_could_not_make_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(subprocess, "run", lambda argv, **_k: subprocess.CompletedProcess(
        argv, 1, "", "ERROR: No matching distribution found for dbos==3.4.0"))
    with pytest.raises(BenchmarkError, match="cannot make the dbos peer") as caught:
        peer_python(name="dbos", var_dir=tmp_path)
    assert "No matching distribution" in str(caught.value.context)


def test_it_pins_the_peer_and_keeps_its_workload_out_of_ratchet() -> None:
    requirements = (peers.PEERS / "dbos" / "requirements.txt").read_text()
    assert "dbos==" in requirements
    workload = peer_workload("dbos").read_text()
    imports = [line for line in workload.splitlines() if line.lstrip().startswith(("import ", "from "))]
    assert not [line for line in imports if "runtime" in line or "django" in line]
