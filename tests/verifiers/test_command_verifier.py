"""The command verifier on its own: a verdict from the exit code, a bounded output kept by
digest, a scrubbed environment, and typed errors when no verdict can be had (DESIGN.md
section 6.5)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtime.core.canonical import digest_bytes
from runtime.errors import (
    TaskSpecError,
    VerifierCommandNotFoundError,
    VerifierCommandTimeoutError,
    VerifierWorkdirError,
)
from runtime.taskspec import load_task_spec
from tests.verifiers.support import CHECK_ANSWER, command_verifier, observation, python, write_command_task


def _blobs() -> tuple[dict[str, bytes], object]:
    stored: dict[str, bytes] = {}

    def put(data: bytes) -> str:
        stored[digest_bytes(data)] = data
        return digest_bytes(data)

    return stored, put


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _workspace(tmp_path: Path, answer: str = "42\n") -> Path:
    target = tmp_path / "workspace"
    target.mkdir(parents=True, exist_ok=True)
    (target / "answer.txt").write_text(answer)
    return target


def test_it_passes_on_exit_code_zero_and_keeps_the_output_by_digest(tmp_path: Path) -> None:
    stored, put = _blobs()
    verifier, _ = command_verifier(tmp_path, argv=python(CHECK_ANSWER), put_blob=put)

    outcome = verifier.verify(observation=observation("w1"), target=_workspace(tmp_path), planner_state=None)

    assert outcome.passed
    assert stored[outcome.output_digest] == b"answer.txt holds '42\\n'\n"
    assert "exited 0" in outcome.detail and "environment version w1" in outcome.detail
    assert f"output {outcome.output_digest}" in outcome.detail


def test_it_fails_on_a_nonzero_exit_code_with_the_output(tmp_path: Path) -> None:
    stored, put = _blobs()
    verifier, _ = command_verifier(tmp_path, argv=python(CHECK_ANSWER), put_blob=put)

    outcome = verifier.verify(observation=observation(), target=_workspace(tmp_path, "41\n"), planner_state=None)

    assert not outcome.passed and "exited 1" in outcome.detail
    assert stored[outcome.output_digest] == b"answer.txt holds '41\\n'\n"


def test_it_keeps_stderr_with_stdout(tmp_path: Path) -> None:
    stored, put = _blobs()
    script = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True); sys.exit(3)"
    verifier, _ = command_verifier(tmp_path, argv=python(script), put_blob=put)

    outcome = verifier.verify(observation=observation(), target=_workspace(tmp_path), planner_state=None)

    assert not outcome.passed and "exited 3" in outcome.detail
    assert stored[outcome.output_digest] == b"out\nerr\n"


def test_it_bounds_the_output_keeping_its_head_and_tail(tmp_path: Path) -> None:
    stored, put = _blobs()
    script = "import sys; sys.stdout.write('H' * 1000 + 'x' * 200000 + 'T' * 1000)"
    verifier, _ = command_verifier(tmp_path, argv=python(script), put_blob=put, max_output_bytes=4096)

    outcome = verifier.verify(observation=observation(), target=_workspace(tmp_path), planner_state=None)

    kept = stored[outcome.output_digest]
    assert outcome.passed and len(kept) < 4096 + 100
    assert kept.startswith(b"H" * 1000) and kept.endswith(b"T" * 1000)
    assert b"[ratchet: 197904 bytes of output not kept]" in kept
    assert "202000 bytes, 197904 not kept" in outcome.detail


def test_it_gives_the_command_no_ratchet_key_or_credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RATCHET_CHECKPOINT_KEYS", "k1:c2VjcmV0")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "not-for-tests")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@127.0.0.1/x")
    monkeypatch.setenv("HARMLESS_SETTING", "passed")
    stored, put = _blobs()
    script = "import os, json; print(json.dumps(sorted(os.environ)))"
    verifier, _ = command_verifier(tmp_path, argv=python(script), put_blob=put,
                                   pass_env=["HARMLESS_SETTING"], env={"MODE": "ci"})

    outcome = verifier.verify(observation=observation(), target=_workspace(tmp_path), planner_state=None)

    names = set(eval(stored[outcome.output_digest]))  # noqa: S307 - a JSON list of names we printed
    assert {"HARMLESS_SETTING", "MODE", "PYTHONDONTWRITEBYTECODE"} <= names
    assert not {n for n in names if n.startswith(("RATCHET_", "DJANGO_")) or n == "DATABASE_URL"}


def test_it_refuses_ratchet_and_secret_names_in_the_spec(tmp_path: Path) -> None:
    task = write_command_task(tmp_path, argv=["true"], pass_env=["RATCHET_KEY_FILE", "API_TOKEN"])

    with pytest.raises(TaskSpecError) as caught:
        load_task_spec(task)

    assert "verifier.pass_env[0]" in str(caught.value) and "verifier.pass_env[1]" in str(caught.value)


def test_it_reports_bad_options_by_their_toml_path(tmp_path: Path) -> None:
    task = write_command_task(tmp_path, argv=[""], timeout_seconds=0)

    with pytest.raises(TaskSpecError) as caught:
        load_task_spec(task)

    assert "verifier.argv" in str(caught.value) and "verifier.timeout_seconds" in str(caught.value)


def test_it_raises_a_typed_error_when_the_command_does_not_exist(tmp_path: Path) -> None:
    verifier, _ = command_verifier(tmp_path, argv=["ratchet-no-such-test-runner", "-q"])

    with pytest.raises(VerifierCommandNotFoundError, match="ratchet-no-such-test-runner"):
        verifier.verify(observation=observation(), target=_workspace(tmp_path), planner_state=None)


def test_it_kills_the_whole_process_group_on_timeout(tmp_path: Path) -> None:
    stored, put = _blobs()
    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('started the tests', flush=True)\n"
        "time.sleep(60)\n"
    )
    verifier, _ = command_verifier(tmp_path, argv=python(script), put_blob=put, timeout_seconds=1.5,
                                   allowed_workdirs=[str(tmp_path)])
    started = time.monotonic()

    with pytest.raises(VerifierCommandTimeoutError) as caught:
        verifier.verify(observation=observation(), target=_workspace(tmp_path), planner_state=None)

    assert time.monotonic() - started < 10
    digest = caught.value.context["output_digest"]
    assert stored[digest] == b"started the tests\n" and f"output {digest}" in caught.value.message
    grandchild = int(pid_file.read_text())
    for _ in range(100):  # killed with its group: gone, or a zombie waiting for init
        if not _alive(grandchild):
            break
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_it_refuses_a_workdir_outside_the_environment(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    verifier, _ = command_verifier(tmp_path, argv=["true"], workdir=str(elsewhere))

    with pytest.raises(VerifierWorkdirError, match="outside the environment target"):
        verifier.verify(observation=observation(), target=_workspace(tmp_path), planner_state=None)


def test_it_refuses_a_symlink_that_leaves_the_environment(tmp_path: Path) -> None:
    target = _workspace(tmp_path)
    (target / "tests").symlink_to(tmp_path.parent)
    verifier, _ = command_verifier(tmp_path, argv=["true"], workdir="tests")

    with pytest.raises(VerifierWorkdirError):
        verifier.verify(observation=observation(), target=target, planner_state=None)


def test_it_runs_in_an_allowlisted_directory(tmp_path: Path) -> None:
    stored, put = _blobs()
    (tmp_path / "checks").mkdir()
    verifier, _ = command_verifier(tmp_path, argv=python("import os; print(os.path.basename(os.getcwd()))"),
                                   put_blob=put, workdir=str(tmp_path / "checks"), allowed_workdirs=["checks"])

    outcome = verifier.verify(observation=observation(), target=_workspace(tmp_path), planner_state=None)

    assert outcome.passed and stored[outcome.output_digest] == b"checks\n"
