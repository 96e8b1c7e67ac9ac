"""Story: ``manage.py chaos --faults`` survives faults beyond SIGKILL (DESIGN.md section 8.8).

Real faults, none of them a stand-in inside the code under test: PostgreSQL backends ended with
``pg_terminate_backend``, the mark store's database closed to connections for a while, the
PostgreSQL server crashed and restarted (``pg_ctl -m immediate restart`` of a server this test
starts for itself, so the shared one is never touched), and the var directory on a small tmpfs
filled to the last byte, and the whole work directory on a FUSE passthrough made slow for a
while. Each run still completes with the uninterrupted run's environment, one
effect per idempotency key and no generation rolled back; what cannot be injected somewhere is a
set-up error (exit 2), never a silent SIGKILL.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.chaos.faults import FaultInjector
from runtime.chaos.slow_disk import MOUNT_DIR, STATE_DIR
from runtime.errors import ChaosSetupError
from tests.chaos.test_chaos_command import SLOW_MACHINE
from tests.helpers.pg_cluster import PgCluster, pg_cluster_problem, pg_cluster_start, pg_cluster_stop
from tests.helpers.procs import child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _chaos(task: Path, workdir: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    done = run_manage("chaos", str(task), "--json", "--workdir", str(workdir), *args, env=env, timeout=900)
    assert done.stdout.startswith("{"), done.stderr[-3000:]
    report = json.loads(done.stdout)
    report["returncode"] = done.returncode
    return report


def _unavailable(problem: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {problem}")
    pytest.skip(problem)


@pytest.fixture
def own_server() -> Iterator[PgCluster]:
    """A PostgreSQL server of this test's own, restarted by the pg-restart fault."""
    problem = pg_cluster_problem()
    if problem:
        _unavailable(problem)
    cluster = pg_cluster_start()
    try:
        yield cluster
    finally:
        pg_cluster_stop(cluster)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 MiB tmpfs the test mounts (root only) and unmounts: the campaign's var directory."""
    if os.geteuid() != 0:
        _unavailable("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)], check=True, timeout=60)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, timeout=60)


def _passed_with(report: dict, faults: dict[str, int]) -> None:
    assert (report["returncode"], report["violations"], report["verdict"]) == (0, [], "PASS"), report
    assert (report["completed"], report["duplicates"]) == (report["runs"], 0)
    assert report["faults"] == faults
    assert report["recoveries_failed"] == 0


@SLOW_MACHINE
@pytest.mark.skipif(os.environ.get("DATABASE_URL", "").startswith("postgres"),
                    reason="runs in the SQLite pass: it brings a PostgreSQL server of its own either way")
def test_chaos_faults_every_postgresql_fault_on_a_server_of_its_own(
        long_task: Path, tmp_path: Path, own_server: PgCluster) -> None:
    env = child_env(DATABASE_URL=own_server.url("ratchet"))
    report = _chaos(long_task, tmp_path / "chaos", "--runs", "1", "--kills", "3", "--seed", "11",
                    "--faults", "pg-terminate,mark-store-down,pg-restart",
                    "--pg-restart-command", own_server.restart_command, env=env)
    _passed_with(report, {"pg-terminate": 1, "mark-store-down": 1, "pg-restart": 1})
    errors = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "chaos" / "logs").glob("*.err"))
    assert "Traceback" not in errors, "every child that met a fault said so in a typed error"
    assert "the main database connection was lost during a step" in errors


@SLOW_MACHINE
@pytest.mark.skipif(os.environ.get("DATABASE_URL", "").startswith("postgres"),
                    reason="runs in the SQLite pass: there the embedded database is in the var directory too")
def test_chaos_faults_a_full_var_directory(long_task: Path, small_disk: Path) -> None:
    report = _chaos(long_task, small_disk / "chaos", "--runs", "1", "--kills", "2", "--seed", "5",
                    "--faults", "disk-full,sigkill")
    _passed_with(report, {"disk-full": 1, "sigkill": 1})


@SLOW_MACHINE
@pytest.mark.skipif(os.environ.get("DATABASE_URL", "").startswith("postgres"),
                    reason="runs in the SQLite pass: there the embedded database is on the slow disk too")
def test_chaos_faults_a_slow_disk(long_task: Path, tmp_path: Path) -> None:
    # The command mounts a FUSE passthrough at WORKDIR/disk, runs the whole campaign (scratch
    # SQLite store, var directory, targets) on it, makes it slow for each slow-disk fault, and
    # stops its server and unmounts on the way out.
    if not os.path.exists("/dev/fuse"):
        _unavailable("there is no /dev/fuse")
    try:
        import mfusepy  # noqa: F401  (it loads libfuse on import)
    except (ImportError, OSError) as exc:
        _unavailable(f"the FUSE binding cannot load: {exc} (install Debian's fuse3 and the test extra)")
    report = _chaos(long_task, tmp_path / "chaos", "--runs", "2", "--kills", "2", "--seed", "3",
                    "--faults", "slow-disk,sigkill")
    _passed_with(report, {"slow-disk": 2, "sigkill": 2})
    mountpoint = (tmp_path / "chaos").resolve() / MOUNT_DIR
    assert report["workdir"] == str(mountpoint)
    assert report["store"] == str(mountpoint / "var" / "chaos.sqlite3")
    assert not os.path.ismount(mountpoint)
    state = mountpoint.parent / STATE_DIR
    assert (state / "backing" / "var" / "chaos.sqlite3").is_file(), "the store lived on the passthrough"
    assert "stopped and unmounted" in (state / "server.log").read_text()


def test_chaos_faults_a_slow_disk_that_cannot_be_mounted_is_a_set_up_error(short_task: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "chaos"
    workdir.mkdir()
    (workdir / MOUNT_DIR).write_text("a file where the mount point would go\n")
    done = run_manage("chaos", str(short_task), "--faults", "slow-disk", "--workdir", str(workdir), timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "slow-disk cannot mount its FUSE passthrough" in done.stderr
    assert "run 0" not in done.stderr, "nothing ran"
    with pytest.raises(ChaosSetupError, match="FUSE mount"):
        FaultInjector(workdir=tmp_path).check(["slow-disk"])


def test_chaos_faults_that_cannot_be_injected_here_are_a_set_up_error(short_task: Path, tmp_path: Path) -> None:
    unknown = run_manage("chaos", str(short_task), "--faults", "cosmic-ray", "--workdir", str(tmp_path / "a"),
                         timeout=300)
    assert unknown.returncode == 2 and "cosmic-ray" in unknown.stderr
    big = run_manage("chaos", str(short_task), "--faults", "disk-full", "--workdir", str(tmp_path / "b"),
                     timeout=300)
    assert big.returncode == 2 and "small one made for it" in big.stderr, big.stderr[-2000:]
    restart = run_manage("chaos", str(short_task), "--faults", "pg-restart", "--workdir", str(tmp_path / "c"),
                         timeout=300)
    assert restart.returncode == 2, restart.stderr[-2000:]
    assert "needs PostgreSQL" in restart.stderr or "--pg-restart-command" in restart.stderr
