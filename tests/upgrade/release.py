"""The previous release, taken from this repository's history and installed into a venv of its own.

``previous_release()`` reads ``tests/upgrade/previous_release.toml`` and checks the commit against
the history (present, an ancestor of HEAD, declaring that version). ``release_install()`` extracts
the commit with ``git archive`` (no worktree to clean up) and installs it, without dependencies,
into a venv that sees the current venv's packages through a ``.pth`` line: the old code and its
own entry points and version, the same third-party libraries. Both are cached under
``var/releases/<commit>/`` (or ``RATCHET_TEST_RELEASES_DIR``), built under a lock and marked
ready last, so two test passes never use a half-built one.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.procs import ROOT

PREVIOUS_RELEASE = Path(__file__).with_name("previous_release.toml")


@dataclass(frozen=True)
class Release:
    """An installed release: its source folder (``manage.py``) and its interpreter."""

    commit: str
    version: str
    source: Path
    python: Path


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, timeout=120)


def previous_release() -> tuple[str, str]:
    """``(commit, version)`` of the release this code upgrades from.

    Fails (never skips) when the history does not hold it: CI clones the whole history.
    """
    recorded = tomllib.loads(PREVIOUS_RELEASE.read_text(encoding="utf-8"))
    commit, version = str(recorded["commit"]), str(recorded["version"])
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        raise AssertionError(f"commit {commit} of {PREVIOUS_RELEASE.name} is not in this clone's history "
                             "(a shallow clone? fetch the whole history)")
    if _git("merge-base", "--is-ancestor", commit, "HEAD").returncode != 0:
        raise AssertionError(f"the previous release {commit} is not an ancestor of HEAD")
    declared = tomllib.loads(_git("show", f"{commit}:pyproject.toml").stdout.decode())["project"]["version"]
    if declared != version:
        raise AssertionError(f"{PREVIOUS_RELEASE.name} says {version}, the commit's pyproject.toml says {declared}")
    return commit, version


def releases_dir() -> Path:
    return Path(os.environ.get("RATCHET_TEST_RELEASES_DIR") or ROOT / "var" / "releases")


def release_install(commit: str, version: str) -> Release:
    """The release at ``commit``, installed (cached) into its own venv."""
    home = releases_dir() / commit
    release = Release(commit=commit, version=version, source=home / "src", python=home / "venv" / "bin" / "python")
    releases_dir().mkdir(parents=True, exist_ok=True)
    # An editable install names its folder, so it is built in place, one pass at a time.
    with open(releases_dir() / f"{commit}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / "ready").exists():
            shutil.rmtree(home, ignore_errors=True)
            _build(commit, home)
    return release


def _build(commit: str, home: Path) -> None:
    archive = _git("archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise AssertionError(f"git archive {commit} failed: {archive.stderr.decode()[-500:]}")
    (home / "src").mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as opened:
        opened.extractall(home / "src", filter="data")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / "venv")], check=True, timeout=300)
    python = home / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # After the release's own site-packages: the current venv's third-party libraries.
    Path(site, "current-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--disable-pip-version-check", "-e", str(home / "src")],
        capture_output=True, text=True, timeout=600)
    if installed.returncode != 0:
        raise AssertionError(f"installing {commit} failed:\n{installed.stdout[-2000:]}{installed.stderr[-2000:]}")
    (home / "ready").touch()
